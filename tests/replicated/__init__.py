"""Tests on 2 logical CPU devices, run by tests/test_distribute.py in a fresh pytest process (KPPO_REPLICATED=1)."""
