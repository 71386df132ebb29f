from finreflect_eval.cli import main

raise SystemExit(main())
