/* "SMC planning": the map layer of Nigeria's seasonal malaria chemoprevention rule (docs: smc).
 *
 * Loaded by the map only when the layer is first switched on (a few KB), so the first view's bytes
 * do not grow. It draws its own layer, above the risk colours and from the outlines the map already
 * has, shading each state (country view) or LGA (a chosen state) by the rule's verdict and margin
 * (paths `smc-area smc-<code>`); clicks pass through to the map beneath. Its panel shows the chosen area's verdict, margin, rain onset, first cycle, cycles and
 * the children reached per cycle in the state's last campaign. Reads /v1/transmission/smc/states once
 * and /v1/transmission/smc/lgas once per state, with the map's key. Without JavaScript the same
 * verdicts are in the tables of /docs/smc.html.
 * Sources: CHIRPS v2.0 (UCSB CHC; WFP/HDX, CC BY-IGO), IDM/GSOD LGA rain and HBHI SMC rounds
 * (numalariamodeling, Apache-2.0), NMEP SMC treatments (sepmein/nigeria_malaria_report_2022, Apache-2.0).
 */
(function () {
  "use strict";
  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  // ColorBrewer Blues for eligible (clear, narrow margin), a pale orange for not eligible
  var CLASSES = [
    { key: "clear", label: "eligible, margin ≥ 0.05", colour: "#3182bd" },
    { key: "narrow", label: "eligible, margin < 0.05", colour: "#9ecae1" },
    { key: "no", label: "not eligible", colour: "#fee6ce" },
    { key: "none", label: "no verdict", colour: "#d9dee7" },
  ];
  var on = false, states = null, stateRows = {}, lgaRows = {}, asked = {}, layer = null, drawn = 0;

  function classOf(r) {
    if (!r || r.eligible === null || r.eligible === undefined) return CLASSES[3];
    if (!r.eligible) return CLASSES[2];
    return r.margin >= 0.05 ? CLASSES[0] : CLASSES[1];
  }

  function clear(h) {
    if (layer) h.map.removeLayer(layer);
    layer = null;
  }

  /** The layer of the map's current view: its states, or the chosen state's LGAs. */
  function draw(h, geo) {
    var v = h.view(), L = window.L;
    clear(h);
    if (!h.map.getPane("smc")) {
      h.map.createPane("smc").style.zIndex = 440; // above the LGAs (400), below the state edges (450)
      h.map.getPane("smc").style.pointerEvents = "none";
    }
    layer = L.geoJSON(geo, { pane: "smc", interactive: false, style: function (f) {
      var lga = f.properties.lga_code, code = lga || f.properties.state_code;
      var chosen = lga && lga === v.lga;
      return { className: "smc-area smc-" + code, fillColor: classOf(lga ? lgaRows[lga] : stateRows[code]).colour,
        fillOpacity: 0.9, color: chosen ? "#000000" : "#ffffff", weight: chosen ? 2.5 : 0.6, opacity: 1 };
    } }).addTo(h.map);
  }

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  function month(m) { return m ? MONTHS[m - 1] : "–"; }

  function loadStates(h) {
    if (!states) {
      states = h.api("/v1/transmission/smc/states").then(function (doc) {
        doc.states.forEach(function (r) { stateRows[r.state_code] = r; });
        return doc;
      });
      states.catch(function () { states = null; });
    }
    return states;
  }

  function loadLgas(h, code) {
    if (!code) return Promise.resolve(null);
    if (!asked[code]) {
      asked[code] = h.api("/v1/transmission/smc/lgas?state=" + encodeURIComponent(code)).then(function (doc) {
        doc.lgas.forEach(function (r) { lgaRows[r.lga_code] = r; });
        return doc;
      });
      asked[code].catch(function () { delete asked[code]; });
    }
    return asked[code];
  }

  function legend() {
    var ul = el("ul", undefined, "smc-legend");
    CLASSES.forEach(function (c) {
      var li = el("li"), sw = el("span", undefined, "swatch");
      sw.style.background = c.colour;
      li.appendChild(sw);
      li.appendChild(document.createTextNode(" " + c.label));
      ul.appendChild(li);
    });
    return ul;
  }

  function render(h) {
    var panel = h.panel, v = h.view();
    panel.textContent = "";
    panel.hidden = !on;
    if (!on) return;
    var lga = v.lga && lgaRows[v.lga], st = stateRows[(v.gazetteer[v.lga] || {}).state_code || v.state];
    var r = lga || st;
    panel.appendChild(el("h2", "SMC planning" + (r ? ": " + (lga ? lga.lga : st.state) : "")));
    panel.appendChild(legend());
    if (!r) {
      panel.appendChild(el("p", "Choose a state or an LGA for its verdict, timing and cycles.", "muted"));
    } else {
      var dl = el("dl");
      var rows = [
        ["Verdict", r.eligible === null ? "no verdict (fewer than 4 complete years)" : r.eligible ? "eligible" : "not eligible"],
        ["Margin", r.margin === null ? "–" : (r.margin >= 0 ? "+" : "") + r.margin.toFixed(3) + " (share over 0.60)"],
        ["Years passed", r.years_passed + " of the last 10 (" + r.window_first_year + "–" + r.window_last_year + ")"],
        ["Rain onset", month(r.onset_month_median) + " (" + month(r.onset_month_earliest) + "–" + month(r.onset_month_latest) + ")"],
        ["First cycle", r.first_cycle_month ? month(r.first_cycle_month) : "– (not eligible)"],
        ["Cycles", r.cycles ? r.cycles + ": " + r.cycle_months.map(month).join(", ") : "–"],
      ];
      if (st) {
        rows.push(["Children reached", st.children_treated_mean_per_cycle === null ? "no campaign recorded"
          : st.children_treated_mean_per_cycle.toLocaleString("en") + " per cycle (" + st.state + ", " + st.last_campaign_year + ")"]);
        var ty = st.rain_this_year;
        if (ty) rows.push(["Rain this year", ty.percent_of_average + " % of average to " + ty.through + (ty.provisional ? " (provisional)" : "")]);
      }
      rows.forEach(function (p) { dl.appendChild(el("dt", p[0])); dl.appendChild(el("dd", p[1])); });
      panel.appendChild(dl);
    }
    var note = el("p");
    var a = el("a", "Planning SMC with this service");
    a.href = h.base + "smc.html";
    note.appendChild(el("small", "Nigeria's rule: ≥ 60 % of the year's rain in 4 consecutive months, in 4 consecutive years. "));
    note.appendChild(a);
    panel.appendChild(note);
  }

  /** Re-shows the layer for the map's current view (a state or LGA chosen since). */
  function show(h) {
    if (!on) return Promise.resolve();
    var code = h.view().state, mine = ++drawn;
    return Promise.all([loadStates(h), loadLgas(h, code), h.outlines(code)]).then(function (res) {
      if (!on || mine !== drawn) return; // switched off, or another view asked for since
      draw(h, res[2]);
      render(h);
    }).catch(function (err) { h.panel.hidden = false; h.panel.textContent = h.explain(err); });
  }

  function toggle(checked, h) {
    on = checked;
    if (!on) {
      clear(h);
      render(h);
      return Promise.resolve();
    }
    return show(h);
  }

  window.MalariaSmc = { toggle: toggle, show: show };
})();
