// labformer book: search results. A glossary term matches a query as an index entry and
// would outrank every chapter (Sphinx scores an exact index entry 100, a chapter title 15),
// so a reader searching "attention" got a screen of one-line definitions first. Glossary
// results keep their order among themselves but rank below the chapters that teach them.
var Scorer = {
  score: function (result) {
    var docname = result[0], score = result[4];
    if (docname === "book/glossary" || /(^|\/)glossary$/.test(docname)) {
      return Math.min(score, 4) - 1 / (1 + score);  // below any chapter hit (>= 5)
    }
    return score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2
};
