/* labformer book: search result snippets that read as text. Sphinx cuts each snippet from the
   page's HTML: without help it shows TeX source ("\(d_k\)"), section numbers and, for a
   glossary term, the bare term. Here maths loses its delimiters, section numbers, navigation
   and the language switch are dropped, and a glossary hit shows its definition. */
(function () {
  "use strict";
  function plainTeX(tex) {
    return tex.replace(/\\[()[\]]/g, "").replace(/\\(?:mathrm|text|operatorname)\{([^}]*)\}/g,
      "$1").replace(/\\([A-Za-z]+)/g, "$1").replace(/[{}]/g, "").replace(/\s+/g, " ").trim();
  }
  function install() {
    if (typeof Search === "undefined" || Search._labformerText) return;
    Search._labformerText = true;
    Search.htmlToText = function (htmlString, anchor) {
      var doc = new DOMParser().parseFromString(htmlString, "text/html");
      doc.querySelectorAll(".headerlink, script, style, .section-number, nav, .toctree-wrapper, " +
        ".lf-language-switch, .lf-explorer, .bd-header-article, .header-article-items, " +
        ".bd-sidebar-secondary, .prev-next-area, .dropdown").forEach(function (e) { e.remove(); });
      doc.querySelectorAll(".math").forEach(function (m) { m.textContent = plainTeX(m.textContent); });
      var main = doc.querySelector('[role="main"]');
      if (!main) return "";
      var target = anchor ? doc.getElementById(decodeURIComponent(anchor.replace(/^#/, ""))) : null;
      if (target && target.tagName === "DT") {
        var dd = target.nextElementSibling;
        while (dd && dd.tagName === "DT") dd = dd.nextElementSibling;
        return target.textContent + ": " + (dd ? dd.textContent : "");
      }
      return (target && main.contains(target) ? target : main).textContent;
    };
  }
  install();
  document.addEventListener("DOMContentLoaded", install);
})();
