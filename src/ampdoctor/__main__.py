import sys

from ampdoctor.cli import main

sys.exit(main())
