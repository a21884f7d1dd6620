// labformer book: search results. A glossary term matches a query as an index entry and
// would outrank every chapter (Sphinx scores an exact index entry 100, a chapter title 15),
// so a reader searching "attention" got a screen of one-line definitions first. Glossary
// results keep their order among themselves but rank below the chapters that teach them.
// A chapter whose title holds the whole query ranks above the chapters that only use it,
// the one whose title the query fills most first (in Chinese, "self-attention" before
// "sequence-to-sequence with attention", whose title also holds it):
// Sphinx scores every title word alike and breaks ties by the alphabet.
var Scorer = {
  query: function () {
    var q = (typeof Search !== "undefined" && Search._labformerQuery) ||
      new URLSearchParams(window.location.search).get("q") || "";
    return q.toLowerCase().replace(/\s+/g, " ").trim();
  },
  pageTitle: function (title) {  // "<span>2. </span>Self-attention > The idea" -> page title
    var text = new DOMParser().parseFromString(title || "", "text/html").body.textContent;
    return text.split(" > ")[0].replace(/^\s*[\d.]+\s+/, "").toLowerCase().trim();
  },
  score: function (result) {
    var docname = result[0], score = result[4];
    if (docname === "book/glossary" || /(^|\/)glossary$/.test(docname)) {
      return Math.min(score, 4) - 1 / (1 + score);  // below any chapter hit (>= 5)
    }
    var query = Scorer.query(), title = Scorer.pageTitle(result[1]);
    if (query && title && title.indexOf(query) !== -1) {
      // above any other chapter (at most 16), the fuller the title's match the higher; the
      // page itself above its own first section
      return 20 + 10 * query.length / title.length + (result[2] ? 0 : 0.5);
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
