"""How the analyses name a run's software: the framework as people write it, and XLA as a system's name says
it. (TensorFlow's own word on XLA is ``details['xla']``, stored by the tf_cnn parser.)"""

from __future__ import annotations

import re
from typing import Any


def xla(system: Any) -> bool:
    """Whether a system's name says it compiles with XLA (``3970X-GeForce_RTX_3090_XLA``)."""
    return isinstance(system, str) and "XLA" in re.split(r"[_\-\s.]+", system.upper())


def framework_name(framework: Any) -> str:
    """A framework as people write it (``tensorflow`` -> TensorFlow); '' for none."""
    names = {"tensorflow": "TensorFlow", "pytorch": "PyTorch", "mxnet": "MXNet", "caffe": "Caffe"}
    return names.get(str(framework), str(framework)) if framework else ""
