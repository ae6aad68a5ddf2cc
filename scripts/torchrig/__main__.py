from torchrig.cli import main

raise SystemExit(main())
