"""The file-system primitives moved to cycleio.fsutil (a bottom module: records and config use them too).

This name stays while staging.py and surrogates/ncfiles.py are being split apart (they import it);
import cycleio.fsutil in new code, and remove this module once they do.
"""

from ..fsutil import *  # noqa: F401,F403
