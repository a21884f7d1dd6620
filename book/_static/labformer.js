/* labformer book: a figure shown smaller than it can be drawn (on a phone, or in the column of a
   wide screen) opens larger in a scrolling layer when tapped or clicked, with its caption and a
   close button; Escape, the button, a tap or a click closes it. A tap on a figure never
   navigates away from the page. */
(function () {
  "use strict";
  var SELECTOR = ".bd-content div.cell_output img, .bd-content figure img";

  // The plots are 2x PNGs: shown at half their pixels on a phone (it scrolls), and as wide as
  // the window allows, up to all their pixels, on a wide screen. A diagram (an SVG drawn at
  // its reading size, labformer.book.diagrams) opens at its full size.
  function zoomWidth(img) {
    if (img.closest(".lf-diagram")) return img.naturalWidth;
    return Math.max(img.naturalWidth / 2, Math.min(img.naturalWidth, window.innerWidth - 48));
  }

  function zoomable(img) {
    return img.naturalWidth && img.getBoundingClientRect().width * 1.15 < zoomWidth(img);
  }

  // The edition's words: its catalogue (book/locales/LANG/scripts/labformer.json), which the
  // build (book/_ext/labformer_book.py) writes into every page's head as
  // <script type="application/json" id="lf-words-labformer">; English without it.
  var WORDS = { close: "Close", hint: "\u2194 Swipe sideways for the rest; tap to enlarge" };
  var EDITION = document.getElementById("lf-words-labformer");
  if (EDITION) WORDS = Object.assign(WORDS, JSON.parse(EDITION.textContent));
  var CLOSE = WORDS.close;

  function mark() {
    document.querySelectorAll(SELECTOR).forEach(function (img) {
      img.classList.toggle("lf-zoomable", Boolean(zoomable(img)));
    });
  }

  function open(img) {
    var dialog = document.createElement("dialog");
    dialog.className = "lf-zoom";
    var button = document.createElement("button");
    button.type = "button";
    button.className = "lf-zoom-close";
    button.textContent = "\u00d7";
    button.setAttribute("aria-label", CLOSE);
    button.title = CLOSE;
    dialog.appendChild(button);
    var big = document.createElement("img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt;
    big.width = Math.round(zoomWidth(img));
    dialog.appendChild(big);
    var figure = img.closest("figure");
    var caption = figure && figure.querySelector("figcaption");
    if (caption) {
      var text = document.createElement("p");
      text.className = "lf-zoom-caption";
      var words = caption.cloneNode(true);  // without its "#" permalink
      words.querySelectorAll(".headerlink").forEach(function (a) { a.remove(); });
      text.textContent = words.textContent.trim();
      dialog.appendChild(text);
    }
    dialog.addEventListener("click", function () { dialog.close(); });
    dialog.addEventListener("close", function () { dialog.remove(); });
    document.body.appendChild(dialog);
    dialog.showModal();
  }

  // Sphinx links a scaled figure to its bare PNG: a tap would leave the chapter. The figure
  // opens in place instead (zoomed when it is shown smaller than its size), never elsewhere.
  document.addEventListener("click", function (event) {
    var img = event.target.closest && event.target.closest(SELECTOR);
    if (!img) return;
    var link = img.closest("a[href]");
    if (link && /(^|\/)_images\//.test(link.getAttribute("href"))) event.preventDefault();
    if (img.classList.contains("lf-zoomable")) open(img);
  });
  // The themes wire the table of contents (the ☰ "primary-toggle") and the page's contents
  // ("secondary-toggle") to the first button of each kind only: the page header's, hidden
  // (0 x 0) at every width. The visible buttons in the article header forward to it, so the
  // theme opens its drawer on a phone and shows or hides the sidebar on a wide screen.
  document.addEventListener("click", function (event) {
    [".primary-toggle", ".secondary-toggle"].forEach(function (kind) {
      var button = event.target.closest && event.target.closest(kind);
      var first = document.querySelector(kind);
      if (button && first && button !== first) {
        event.preventDefault();
        first.click();
      }
    });
  });
  // Escape closes the layer before any other handler sees the key (Sphinx's search-highlight
  // script listens for it on the document and would swallow it).
  window.addEventListener("keydown", function (event) {
    var dialog = document.querySelector("dialog.lf-zoom[open]");
    if (dialog && event.key === "Escape") {
      event.preventDefault();
      event.stopImmediatePropagation();
      dialog.close();
    }
  }, true);
  // On a phone a wide figure pans instead of shrinking (labformer.css, max-width: 600px): a
  // plot's text is drawn at 11 px or more at its size (labformer.book.notebook.MIN_TEXT_PX) and is
  // shown at PHONE_SCALE of it, 9 px or more; a diagram's at 13 px or more
  // (labformer.book.diagrams.MIN_FONT), shown at DIAGRAM_SCALE of it, 9 px or more.
  var PHONE_SCALE = 9 / 11;
  var DIAGRAM_SCALE = 9 / 13;
  var HINT = WORDS.hint;

  function edges() {
    document.querySelectorAll(".lf-figure-pan").forEach(function (pan) {
      var box = pan.firstElementChild;
      pan.classList.toggle("lf-overflows", box.scrollWidth > box.clientWidth + 1);
      pan.classList.toggle("lf-more-right",
        box.scrollLeft + box.clientWidth < box.scrollWidth - 1);
    });
  }

  function pan() {
    document.querySelectorAll(SELECTOR).forEach(function (img) {
      var diagram = Boolean(img.closest(".lf-diagram"));
      var asked = diagram ? img.naturalWidth : parseFloat(img.style.width);
      if (!asked || img.closest(".lf-figure-scroll")) return;
      var link = img.parentElement.tagName === "A" ? img.parentElement : null;
      var inner = link || img;
      var outer = document.createElement("div");
      outer.className = "lf-figure-pan";
      outer.dataset.lfHint = HINT;
      var box = document.createElement("div");
      box.className = "lf-figure-scroll";
      inner.parentNode.insertBefore(outer, inner);
      outer.appendChild(box);
      box.appendChild(inner);
      img.style.setProperty("--lf-asked-width", asked + "px");
      img.style.setProperty("--lf-phone-width",
        Math.round(asked * (diagram ? DIAGRAM_SCALE : PHONE_SCALE)) + "px");
      box.addEventListener("scroll", function () {
        outer.classList.toggle("lf-more-right",
          box.scrollLeft + box.clientWidth < box.scrollWidth - 1);
      }, { passive: true });
    });
  }

  // The language switch (labformer_book.py writes it at the top of the article) moves into the
  // article's header bar, which stays in view while the chapter scrolls and covers no text.
  function placeSwitch() {
    var choice = document.querySelector(".bd-article .lf-language-switch");
    var bar = document.querySelector(".bd-header-article .article-header-buttons");
    if (!choice || !bar) return;
    var item = document.createElement("div");
    item.className = "lf-language-item";
    item.appendChild(choice);
    bar.insertBefore(item, bar.firstChild);
  }

  placeSwitch();
  pan();
  document.addEventListener("DOMContentLoaded", function () { placeSwitch(); pan(); });
  window.addEventListener("load", function () { pan(); edges(); mark(); });
  window.addEventListener("resize", function () { edges(); mark(); });
})();
