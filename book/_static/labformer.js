/* labformer book: a figure shown narrower than its own size (on a phone, say) opens at full
   size in a scrolling layer when tapped or clicked; Escape, a tap or a click closes it. A tap
   on a figure never navigates away from the page. */
(function () {
  "use strict";
  var SELECTOR = ".bd-content div.cell_output img, .bd-content figure img";

  function zoomable(img) {
    return img.naturalWidth && img.getBoundingClientRect().width + 1 < img.naturalWidth / 2;
  }

  function mark() {
    document.querySelectorAll(SELECTOR).forEach(function (img) {
      img.classList.toggle("lf-zoomable", Boolean(zoomable(img)));
    });
  }

  function open(img) {
    var dialog = document.createElement("dialog");
    dialog.className = "lf-zoom";
    var big = document.createElement("img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt;
    big.width = Math.round(img.naturalWidth / 2);  // 2x PNGs: their display size
    dialog.appendChild(big);
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
  // The theme opens the page's contents from the first "secondary-toggle" button only (the
  // page header's, hidden on wide screens): the article header's button forwards to it.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".secondary-toggle");
    var first = document.querySelector(".secondary-toggle");
    if (button && first && button !== first) {
      event.preventDefault();
      first.click();
    }
  });
  window.addEventListener("load", mark);
  window.addEventListener("resize", mark);
})();
