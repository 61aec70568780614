"""`python -m kppo.cli`."""

from kppo.cli.main import main

raise SystemExit(main())
