"""The book's machinery: what the chapters use to show and check the model, not the model.

- :mod:`~labformer.book.notebook`: a chapter's setup, its evidence lines, glued values, stored
  sweeps and the statistics that decide verdicts;
- :mod:`~labformer.book.diagrams`: the figures drawn from the running model (SVG);
- :mod:`~labformer.book.svg`: the diagrams' SVG toolkit (colours, labels in both editions,
  cells, boxes, arrows, reading a picture back);
- :mod:`~labformer.book.plot`: the book's plots and their Chinese twins;
- :mod:`~labformer.book.figures`: matplotlib figures drawn from a chapter's running model;
- :mod:`~labformer.book.measure`: what a computation costs (autograd's saved bytes, graph
  depth);
- :mod:`~labformer.book.exercises`: the graded exercises and their messages;
- :mod:`~labformer.book.testing`: hand-written test doubles with the decoding interface;
- :mod:`~labformer.book.record`: recording every attention's weights during a forward pass;
- :mod:`~labformer.book.alignment`: reading a trained translator's attention.

Nothing in the library (``labformer.*`` outside this package and ``labformer.app``) imports it.
"""
