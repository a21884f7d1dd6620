/* labformer: draws the attention explorers that labformer.book.plot.attention_explorer writes into
   the pages, with the book's one local copy of plotly.js (loaded before this file, both
   deferred, on pages that hold an explorer). Each explorer is a <div class="lf-explorer"> that
   carries its weights as JSON; this script adds selectors for kind, layer and head, and one
   heatmap whose hover shows the query, the key and the weight. Positions, layers and heads are
   counted from 1, as in the text; weights share one colour scale, 0 to 1, with its colour bar.
   On the Chinese edition's pages the controls, axes and hover text are in Chinese, and the
   title and the kinds' names are the Chinese ones the explorer carries (title_zh, name_zh). */
(function () {
  "use strict";

  var WORDS = {
    en: { kind: "kind", layer: "layer", head: "head", query: "query", key: "key",
          weight: "weight", layerN: "layer {n}", headN: "head {n}",
          missing: "The interactive view needs plotly.min.js, which did not load." }
  };

  // The edition's words: its catalogue (book/locales/LANG/scripts/labformer-explorer.json),
  // which the build (book/_ext/labformer_book.py) writes into the page as
  // <script type="application/json" id="lf-words-labformer-explorer">; English where it has
  // no word.
  function editionWords() {
    var node = document.getElementById("lf-words-labformer-explorer");
    return Object.assign({}, WORDS.en, node ? JSON.parse(node.textContent) : {});
  }

  function language() {
    var lang = (document.documentElement.getAttribute("lang") || "").toLowerCase();
    return lang.indexOf("zh") === 0 || /\/zh\//.test(location.pathname) ? "zh" : "en";
  }

  function escape(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function range(n) {
    return Array.from({ length: n }, function (_, i) { return i; });
  }

  // A labelled <select>; `onChange` receives the chosen index.
  function selector(box, name, caption_text, onChange) {
    var label = document.createElement("label");
    label.className = "lf-explorer-control";
    var caption = document.createElement("span");
    caption.textContent = caption_text;
    var select = document.createElement("select");
    select.setAttribute("data-lf-control", name);
    select.addEventListener("change", function () { onChange(Number(select.value)); });
    label.appendChild(caption);
    label.appendChild(select);
    box.appendChild(label);
    return select;
  }

  function fill(select, names, chosen) {
    select.textContent = "";
    names.forEach(function (name, i) {
      var option = document.createElement("option");
      option.value = String(i);
      option.textContent = name;
      select.appendChild(option);
    });
    select.value = String(chosen);
    select.parentNode.hidden = names.length < 2;
  }

  function draw(root) {
    var source = root.querySelector("script.lf-explorer-data");
    if (!source || root.getAttribute("data-lf-ready")) return;
    var fallback = root.querySelector(".lf-explorer-fallback");
    var zh = language() === "zh", words = editionWords();
    if (!window.Plotly) {
      if (fallback) fallback.textContent = words.missing;
      return;
    }
    var data = JSON.parse(source.textContent);
    var kinds = data.kinds;
    var title = zh && data.title_zh ? data.title_zh : data.title;
    var kindName = function (k) { return zh && k.name_zh ? k.name_zh : k.name; };
    var numbered = function (pattern, n) { return pattern.replace("{n}", String(n)); };
    if (title) root.setAttribute("aria-label", title);
    var state = { kind: 0, layer: 0, head: 0 };
    if (fallback) fallback.remove();
    root.setAttribute("data-lf-ready", "1");

    var controls = document.createElement("div");
    controls.className = "lf-explorer-controls";
    var status = document.createElement("span");
    status.className = "lf-explorer-view";
    status.setAttribute("aria-live", "polite");
    var plot = document.createElement("div");
    plot.className = "lf-explorer-plot";

    var kindSelect = selector(controls, "kind", words.kind,
                              function (i) { state.kind = i; update(); });
    var layerSelect = selector(controls, "layer", words.layer,
                               function (i) { state.layer = i; update(); });
    var headSelect = selector(controls, "head", words.head,
                              function (i) { state.head = i; update(); });
    controls.appendChild(status);
    root.appendChild(controls);
    root.appendChild(plot);
    fill(kindSelect, kinds.map(kindName), 0);

    // Heads side by side need room: on a narrow screen they are shown one at a time.
    function sideBySide() {
      return data.side && !(plot.clientWidth && plot.clientWidth < 560);
    }

    function view() {
      var kind = kinds[state.kind];
      var layers = kind.weights.length, heads = kind.weights[0].length;
      state.layer = Math.min(state.layer, layers - 1);
      state.head = Math.min(state.head, heads - 1);
      fill(layerSelect, range(layers).map(function (n) { return numbered(words.layerN, n + 1); }),
           state.layer);
      fill(headSelect, range(heads).map(function (n) { return numbered(words.headN, n + 1); }),
           state.head);
      if (sideBySide()) headSelect.parentNode.hidden = true;  // every head is on show
      var parts = [];
      if (kind.name) parts.push(kindName(kind));
      if (layers > 1) parts.push(numbered(words.layerN, state.layer + 1));
      if (heads > 1 && !sideBySide()) parts.push(numbered(words.headN, state.head + 1));
      status.textContent = parts.join(" · ");
      root.setAttribute("data-lf-view", [state.kind, state.layer, state.head].join(","));
      return kind;
    }

    function figure(kind) {
      var q = kind.queries, k = kind.keys;
      var narrow = plot.clientWidth && plot.clientWidth < 520;
      var text = q.map(function (qa, a) {
        return k.map(function (kb, b) {
          return words.query + " " + (a + 1) + ": " + escape(qa) + "<br>" + words.key + " " +
                 (b + 1) + ": " + escape(kb);
        });
      });
      var heads = sideBySide() ? range(kind.weights[0].length) : [state.head];
      var axis = function (title, tokens) {
        return {
          title: { text: title }, tickmode: "array", tickvals: range(tokens.length),
          ticktext: tokens.map(escape), automargin: true, fixedrange: true, showgrid: false
        };
      };
      var layout = {
        title: title ? { text: escape(title), font: { size: 16 } } : undefined,
        autosize: true,
        height: Math.min(720, 170 + (narrow ? 20 : 26) * Math.max(q.length, 6)),
        margin: { t: title ? 44 : 12, r: 8, b: 8, l: 8 },
        font: { size: narrow ? 12 : 14, color: "#222" },
        paper_bgcolor: "#ffffff", plot_bgcolor: "#ffffff",
        hoverlabel: { font: { size: 14 } }
      };
      if (heads.length > 1) layout.grid = { rows: 1, columns: heads.length, pattern: "independent" };
      var traces = heads.map(function (head, n) {
        var suffix = n ? String(n + 1) : "";
        var xaxis = axis(heads.length > 1 ? words.key + " · " + numbered(words.headN, head + 1)
                                          : words.key, k);
        xaxis.tickangle = -90;
        var yaxis = axis(n ? "" : words.query, q);
        yaxis.autorange = "reversed";
        if (n) yaxis.showticklabels = false;
        layout["xaxis" + suffix] = xaxis;
        layout["yaxis" + suffix] = yaxis;
        return {
          type: "heatmap", z: kind.weights[state.layer][head], x: range(k.length),
          y: range(q.length), text: text, colorscale: "Viridis", zmin: data.zmin,
          zmax: data.zmax, xaxis: "x" + suffix, yaxis: "y" + suffix, xgap: 1, ygap: 1,
          hovertemplate: (heads.length > 1 ? numbered(words.headN, head + 1) + "<br>" : "") +
                         "%{text}<br>" + words.weight + " %{z:.3f}<extra></extra>",
          showscale: n === heads.length - 1,
          colorbar: { title: { text: words.weight, side: "right" }, thickness: 14 }
        };
      });
      return [traces, layout];
    }

    function update() {
      var parts = figure(view());
      window.Plotly.react(plot, parts[0], parts[1],
                          { displaylogo: false, responsive: true, displayModeBar: false });
    }
    update();
  }

  function init() {
    document.querySelectorAll(".lf-explorer").forEach(draw);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
