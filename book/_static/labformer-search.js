/* labformer book: search result snippets that read as text. Sphinx cuts each snippet from the
   page's HTML: without help it shows TeX source ("\(d_k\)"), section numbers, the print-only
   title and table of contents ("Self-attention  Contents..." and nothing else: the snippet
   starts at the first match, the title, and the whitespace after it fills the 240 characters)
   and, for a glossary term, the bare term. Here maths loses its delimiters, section numbers,
   navigation, the page title and the language switch are dropped, whitespace is collapsed, a
   glossary hit shows its definition, and the snippet is cut around the whole query where the
   text holds it (a Chinese query is one word to the browser but several to the index). */
(function () {
  "use strict";
  function plainTeX(tex) {
    return tex.replace(/\\[()[\]]/g, "").replace(/\\(?:mathrm|text|operatorname)\{([^}]*)\}/g,
      "$1").replace(/\\([A-Za-z]+)/g, "$1").replace(/[{}]/g, "").replace(/\s+/g, " ").trim();
  }
  /* The browser sends a run of Chinese characters as one word; the index holds the words
     jieba cut it into. A run the index lacks is cut into the longest words it holds
     ("attention weight", one run of five characters, -> "attention" "weight"), each of
     which a page must contain. */
  function splitChinese(query) {
    var index = Search._index;
    if (!index) return query;
    function known(w) {
      return Object.prototype.hasOwnProperty.call(index.terms, w) ||
        Object.prototype.hasOwnProperty.call(index.titleterms, w);
    }
    return query.replace(/[\u3400-\u9fff]+/g, function (run) {
      if (known(run)) return run;
      var words = [], i = 0;
      while (i < run.length) {
        var j = run.length;
        while (j > i + 1 && !known(run.slice(i, j))) j--;
        if (j > i + 1) { words.push(run.slice(i, j)); i = j; } else i++;
      }
      return words.length ? " " + words.join(" ") + " " : run;
    });
  }
  function install() {
    if (typeof Search === "undefined" || Search._labformerText) return;
    Search._labformerText = true;
    var parseQuery = Search._parseQuery;
    Search._parseQuery = function (query) {  // the scorer (search_scorer.js) reads the query
      Search._labformerQuery = query;
      return parseQuery.call(this, splitChinese(query));
    };
    Search.htmlToText = function (htmlString, anchor) {
      var doc = new DOMParser().parseFromString(htmlString, "text/html");
      doc.querySelectorAll(".headerlink, script, style, .section-number, nav, .toctree-wrapper, " +
        ".lf-language-switch, .lf-explorer, .bd-header-article, .header-article-items, " +
        ".bd-sidebar-secondary, .prev-next-area, .dropdown, .onlyprint, #jb-print-docs-body, " +
        "h1").forEach(function (e) { e.remove(); });
      doc.querySelectorAll(".math").forEach(function (m) { m.textContent = plainTeX(m.textContent); });
      var main = doc.querySelector('[role="main"]');
      if (!main) return "";
      var target = anchor ? doc.getElementById(decodeURIComponent(anchor.replace(/^#/, ""))) : null;
      var text;
      if (target && target.tagName === "DT") {
        var dd = target.nextElementSibling;
        while (dd && dd.tagName === "DT") dd = dd.nextElementSibling;
        text = target.textContent + ": " + (dd ? dd.textContent : "");
      } else {
        text = (target && main.contains(target) ? target : main).textContent;
      }
      return text.replace(/\s+/g, " ").trim();
    };
    Search.makeSearchSummary = function (htmlText, keywords, anchor) {
      var text = Search.htmlToText(htmlText, anchor);
      if (text === "") return null;
      var lower = text.toLowerCase();
      var query = (Search._labformerQuery || "").toLowerCase().replace(/\s+/g, " ").trim();
      var at = query ? lower.indexOf(query) : -1;
      if (at < 0) {  // the first place any search term occurs
        at = [...keywords].map(function (k) { return lower.indexOf(k.toLowerCase()); })
          .filter(function (i) { return i > -1; })
          .reduce(function (a, b) { return Math.min(a, b); }, Infinity);
        if (at === Infinity) at = 0;
      }
      var start = Math.max(at - 80, 0);
      var summary = document.createElement("p");
      summary.classList.add("context");
      summary.textContent = (start ? "..." : "") + text.substr(start, 240).trim() +
        (start + 240 < text.length ? "..." : "");
      return summary;
    };
  }
  install();
  document.addEventListener("DOMContentLoaded", install);
})();
