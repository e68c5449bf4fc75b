"""``python -m tagger.report RUN_DIR... --out reports/NAME``."""
import sys

from tagger.report.build import main

sys.exit(main())
