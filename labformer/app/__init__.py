"""The translator application built on the library: training and translating with one
configuration (:mod:`~labformer.app.translate`), carrying over what the model never saw
(:mod:`~labformer.app.carry`), the book's shared runs (:mod:`~labformer.app.runs`), the
page model (:mod:`~labformer.app.export`) and the command line (:mod:`labformer.app.cli`).
"""
