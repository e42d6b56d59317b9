import sys

from assistant.cli.main import main

sys.exit(main())
