"""kppo's deployment kit: run an exported policy with numpy + LiteRT only (no TensorFlow, no kppo)."""
