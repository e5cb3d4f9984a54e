"""``bench report``, in the order data flows: ``select`` (the runs, and the views computed once), the
sections' numbers (``tables``, ``findings``, ``mlperf``, ``changes``), ``figures`` drawn by ``render``, the
report as plain data (``model``), and the writers (``html``, ``md``). ``build`` puts them together:
``build_report`` and ``make_report``."""
