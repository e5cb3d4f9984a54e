"""How the analyses name a run's software: the framework as people write it, and XLA as a run's ``xla`` tag or
its system's name says it. (TensorFlow's own word on XLA is ``details['xla']``, stored by the tf_cnn parser: an
observation of one process's stderr, whose absence does not say XLA was off, so it is named beside the
configuration, never part of it.)"""

from __future__ import annotations

import re
from typing import Any

#: SQL over ``runs`` or a view with its ``tags``: whether a run's ``xla`` tag is "on" or its system's name says
#: XLA (as :func:`xla` reads a name).
XLA_SQL = ("(coalesce(tags['xla'] = 'on', false) OR "
           "list_contains(regexp_split_to_array(upper(coalesce(tags['system'], '')), '[_\\-\\s.]+'), 'XLA'))")


def xla(system: Any) -> bool:
    """Whether a system's name says it compiles with XLA (``3970X-GeForce_RTX_3090_XLA``)."""
    return isinstance(system, str) and "XLA" in re.split(r"[_\-\s.]+", system.upper())


def pair_xla(p: Any, side: int) -> bool:
    """Whether one side (0: A, 1: B) of a comparison's pair (bench.analytics.compare.Pair) ran with XLA: its
    ``xla`` tag, or its system's name."""
    def value(key: str) -> Any:
        if p.differs and key in p.differs:
            return p.differs[key][side]
        return (p.config.get("tags") or {}).get(key)
    return value("xla") == "on" or xla(value("system"))


def framework_name(framework: Any) -> str:
    """A framework as people write it (``tensorflow`` -> TensorFlow); '' for none."""
    names = {"tensorflow": "TensorFlow", "pytorch": "PyTorch", "mxnet": "MXNet", "caffe": "Caffe"}
    return names.get(str(framework), str(framework)) if framework else ""
