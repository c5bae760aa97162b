from zkcompat.bench.cli import main

raise SystemExit(main())
