import sys

from eagle3lab.cli import main

sys.exit(main())
