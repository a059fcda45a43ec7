/* The risk map: the states coloured by risk, a chosen state's LGAs by month, details, the chosen
 * area's score over time, seasonality and survey charts, and the view's export as CSV and PNG.
 *
 * Reads the API with the key the reader pastes (kept in sessionStorage, sent only in the
 * Authorization header), and asks only for what the view shows, so a phone can afford it
 * (docs/map.md budget: 150 KB for the first view, 150 KB more for a state). First view: the
 * period index, the state outlines at screen scale (a public file of the site, which also lists
 * each state's LGAs) and one month of state risk. A chosen state: its LGA outlines at screen scale,
 * one month of its LGAs' risk, its history, seasons and surveys, and Chart.js, loaded then. Each
 * other month is one small document, asked once; the forecast months come in one. The browser's
 * HTTP cache revalidates with ETags.
 */
(function () {
  "use strict";

  var KEY_STORE = "malaria-risk.api-key";
  // the interactive part is hidden in the page as served: without this script a reader sees the
  // explanation and the server-printed table of the latest month, not dead buttons
  document.getElementById("map-app").hidden = false;
  var config = JSON.parse(document.getElementById("map-config").textContent);
  var LEVELS = config.levels; // [{level, label, colour, lower, upper}]
  var COLOUR = {};
  LEVELS.forEach(function (l) { COLOUR[l.level] = l.colour; });
  var NO_DATA = "#d9dee7";
  var MONTH_NAMES = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

  var BASE = config.base || "/docs/"; // where the site (and its map outlines) is served
  var QUIET = 250; // ms the month slider rests before a month not seen yet is asked for
  var $ = function (id) { return document.getElementById(id); };
  // where this script was served from: project.js lies beside it
  var SCRIPT_BASE = document.currentScript ? document.currentScript.src.replace(/map\.js([?#].*)?$/, "") : "";
  var state = {
    key: null, periods: [], kinds: {}, horizon: {}, provisional: {}, basis: {},
    stateRisk: {}, // period -> state_code -> row
    lgaRisk: {}, // state_code -> period -> lga_code -> row
    asked: {}, // "<view>|<period or forecast>" -> promise of the figures' arrival
    outlines: {}, // state_code -> promise of its LGA outlines
    stateNames: {}, // state_code -> name
    gazetteer: {}, // lga_code -> {lga, state_code, state}
    layers: {}, // lga_code -> Leaflet layer (the chosen state's)
    stateLayers: {}, // state_code -> Leaflet layer
    lgaLayer: null, chosenLine: null, statesLayer: null, map: null, period: null, stateFilter: "", selected: null,
    transmissionStates: null, transmissionLgas: {}, chartLib: null, charts: {},
    history: {}, // request path -> promise of the history route's answer
    forecastScope: null, // whether the key may read forecast months (null: not asked yet)
    shown: null, // {kind: "lga" | "state", code} whose history the chart shows
  };

  // --- small helpers -------------------------------------------------------------------

  function status(text, isError) {
    var el = $("map-status");
    el.textContent = text;
    el.className = isError ? "status error" : "status";
  }

  function ApiError(status, body, retryAfter) {
    this.status = status; this.body = body; this.retryAfter = retryAfter;
  }

  function explain(err) {
    if (err instanceof ApiError) {
      var b = err.body || {};
      var text = "The API answered " + err.status + (b.code ? " " + b.code : "") + (b.detail ? ": " + b.detail : ".");
      if (err.status === 401) text += " Check the key you pasted (keys start with svc_live_ or svc_test_).";
      if (err.retryAfter) text += " Try again in " + err.retryAfter + " s.";
      return text;
    }
    return "Could not reach the API: " + (err && err.message ? err.message : err);
  }

  /** GET with the key in the Authorization header; the browser cache revalidates with ETags. */
  function api(path, as) {
    return fetch(path, { headers: { "Authorization": "Bearer " + state.key }, cache: "no-cache" })
      .then(function (r) {
        if (!r.ok) {
          return r.json().catch(function () { return null; }).then(function (body) {
            throw new ApiError(r.status, body, r.headers.get("Retry-After"));
          });
        }
        if (as === "response") {
          return r.json().then(function (body) { return { body: body, release: r.headers.get("X-Release-Id") }; });
        }
        return as === "text" ? r.text() : as === "blob" ? r.blob() : r.json();
      });
  }

  function fmtShare(v) { return v === "" || v === null || v === undefined ? "no figure" : v; }
  function fmtInt(v) { return v === "" || v === null || v === undefined ? "no figure" : Number(v).toLocaleString("en"); }
  function levelLabel(level) {
    var l = LEVELS.find(function (x) { return x.level === level; });
    return l ? l.label : (level || "no figure");
  }
  function levelOf(score) {
    var found = LEVELS[0];
    LEVELS.forEach(function (l) { if (score >= l.lower) found = l; });
    return found;
  }
  /** "moderate to high" where the 80 % range reaches into another level than the score's alone. */
  function levelsSpanned(r) {
    var lo = levelOf(r.score_low), hi = levelOf(r.score_high);
    return lo.level === hi.level ? "" : lo.label + " to " + hi.label;
  }
  function levelText(r) {
    var span = levelsSpanned(r);
    return levelLabel(r.level) + (span ? " (80 % range: " + span + ")" : "");
  }
  function isForecast(period) { return state.kinds[period] === "forecast"; }
  // the words come from the model's declared terms (pipeline.model.terms.month_labels), via the page
  var WORDS = config.month_labels || {};
  function monthText(period) {
    if (isForecast(period)) {
      var h = state.horizon[period];
      return period + " · forecast" + (h ? ", " + h + (h === "1" ? " month" : " months") + " ahead" : "");
    }
    var basis = WORDS[state.basis[period]];
    return period + " · estimated" + (basis ? " · " + basis : "") +
      (state.provisional[period] ? " · " + (WORDS.provisional || "provisional") : "");
  }
  // what the month's score is made of: the label's title
  function monthWords(period) {
    var made = WORDS[isForecast(period) ? "forecast" : "estimated"] || "";
    var note = !isForecast(period) && state.provisional[period] && WORDS.provisional_note ? "; " + WORDS.provisional_note : "";
    return made ? made + note : "";
  }

  // --- key -----------------------------------------------------------------------------

  function setupKey() {
    var input = $("api-key");
    $("key-form").addEventListener("submit", function (ev) {
      ev.preventDefault(); // never a form submission: the key must not reach a URL
      var key = input.value.trim();
      if (!/^svc_(live|test)_[A-Za-z0-9_-]{32}$/.test(key)) {
        status("That is not an API key: keys start with svc_live_ or svc_test_ followed by 32 characters.", true);
        return;
      }
      sessionStorage.setItem(KEY_STORE, key);
      input.value = "";
      start(key);
    });
    $("forget-key").addEventListener("click", function () {
      sessionStorage.removeItem(KEY_STORE);
      state.key = null;
      $("key-form").classList.remove("has-key");
      $("key-state").textContent = "No key in this tab.";
      status("Key forgotten. Paste a key to load the map.");
    });
    var kept = sessionStorage.getItem(KEY_STORE);
    if (kept) start(kept);
    else status("Paste an API key to load the map. The key stays in this browser tab only.");
  }

  // --- loading ---------------------------------------------------------------------------

  function start(key) {
    state.key = key;
    $("key-form").classList.add("has-key");
    $("key-state").textContent = "Key …" + key.slice(-4) + " (this tab only)";
    status("Loading the states and their risk …");
    Promise.all([
      api("/v1/periods", "response"),
      // the site's own screen-scale outlines: public, no key (docs/geography.md#map-outlines)
      fetch(BASE + "map/states.geojson", { cache: "no-cache" }).then(function (r) {
        if (!r.ok) throw new Error("the state outlines answered " + r.status);
        return r.json();
      }),
    ]).then(function (res) {
      var periods = res[0].body;
      loadPeriods(periods);
      $("release-id").textContent = (res[0].release || "–") + " · model " + periods.model_version;
      loadStates(res[1]);
      setupControls();
      return riskFor("", state.period).then(function () { return res[1]; });
    }).then(function (outlines) {
      status("");
      fitMapHeight(); // once everything above the map has its final size
      drawMap(outlines);
      setPeriod(state.period);
      $("export").hidden = false;
      if ($("smc-layer")) $("smc-layer").disabled = false;
      document.body.classList.add("map-ready");
    }).catch(function (err) {
      status(explain(err), true);
      if (err instanceof ApiError && err.status === 401) {
        sessionStorage.removeItem(KEY_STORE);
        $("key-form").classList.remove("has-key");
        $("key-state").textContent = "No key in this tab.";
      }
    });
  }

  function loadPeriods(p) {
    var h = 0;
    p.months.forEach(function (m) {
      state.kinds[m.period] = m.kind;
      if (m.kind === "forecast") state.horizon[m.period] = String(++h);
      if (m.provisional) state.provisional[m.period] = true;
      if (m.basis) state.basis[m.period] = m.basis; // survey_fit or baseline_x_season (additive)
    });
    state.periods = p.months.map(function (m) { return m.period; });
    state.period = p.last_estimated;
  }

  /** The states file names each state's LGAs: the LGA list works before any state is chosen. */
  function loadStates(outlines) {
    outlines.features.forEach(function (f) {
      var p = f.properties;
      state.stateNames[p.state_code] = p.state;
      p.lgas.forEach(function (l) { state.gazetteer[l[0]] = { lga: l[1], state_code: p.state_code, state: p.state }; });
    });
  }

  /** Rows of the view's month, keyed by code: states (view "") or the LGAs of one state. */
  function rowsFor(view, period) {
    var byPeriod = view ? state.lgaRisk[view] : state.stateRisk;
    return byPeriod && byPeriod[period];
  }

  /** One month of the view: an estimated month is one small document (/v1/risk/states or
   * /v1/risk/lgas); the forecast months come together (/v1/forecasts/…, the forecasts scope).
   * Each answer is kept, so a month seen once is not asked for again. */
  function riskFor(view, period) {
    var key = view + "|" + (isForecast(period) ? "forecast" : period);
    if (!state.asked[key]) {
      var store = function (period, rows) {
        var byPeriod = view ? (state.lgaRisk[view] = state.lgaRisk[view] || {}) : state.stateRisk;
        var out = byPeriod[period] = {};
        rows.forEach(function (r) { out[view ? r.lga_code : r.state_code] = r; });
      };
      var asked;
      if (!isForecast(period)) {
        asked = api(view ? "/v1/risk/lgas?state=" + view + "&period=" + period : "/v1/risk/states?period=" + period)
          .then(function (doc) { store(period, view ? doc.lgas : doc.states); });
      } else if (state.forecastScope === false) {
        asked = Promise.resolve();
      } else {
        var months = Object.keys(state.horizon).length;
        asked = api(view ? "/v1/forecasts/lgas?state=" + view + "&months=" + months : "/v1/forecasts/states?months=" + months)
          .then(function (doc) {
            state.forecastScope = true;
            doc.forecasts.forEach(function (f) { store(f.period, view ? f.lgas : f.states); });
          }, function (err) {
            if (!(err instanceof ApiError && err.status === 403)) throw err;
            state.forecastScope = false; // the key lacks the forecasts scope: those months show no figure
          });
      }
      state.asked[key] = asked;
      asked.catch(function () { delete state.asked[key]; });
    }
    return state.asked[key];
  }

  /** The LGA outlines of one state, at screen scale (a public file of the site, fetched once). */
  function lgaOutlines(code) {
    if (!state.outlines[code]) {
      state.outlines[code] = fetch(BASE + "map/lgas/" + code + ".geojson", { cache: "no-cache" }).then(function (r) {
        if (!r.ok) throw new Error("the outlines of " + code + " answered " + r.status);
        return r.json();
      });
      state.outlines[code].catch(function () { delete state.outlines[code]; });
    }
    return state.outlines[code];
  }

  // --- the map ---------------------------------------------------------------------------

  /** A state's LGAs by rank within the state, in fifths (top fifth in the highest level's colour): within
   * one state most LGAs may share a level, and the order still says where to look first. */
  function rankColour(row, rows) {
    if (!row || !row.rank) return NO_DATA;
    var n = Object.keys(rows).length;
    var fifth = Math.min(LEVELS.length - 1, Math.floor((row.rank - 1) * LEVELS.length / Math.max(1, n)));
    return LEVELS[LEVELS.length - 1 - fifth].colour;
  }

  function styleFor(code) {
    var rows = rowsFor(state.stateFilter, state.period) || {}, row = rows[code];
    var byRank = state.byRank && state.stateFilter;
    return {
      fillColor: byRank ? rankColour(row, rows) : row && COLOUR[row.level] ? COLOUR[row.level] : NO_DATA,
      fillOpacity: 0.9,
      color: code === state.selected ? "#000000" : "#ffffff",
      weight: code === state.selected ? 2.5 : 0.6,
      opacity: 1,
    };
  }

  /** A state's fill: its risk level in the country view; in a state view the others are grey. */
  function stateStyle(f) {
    var code = f.properties.state_code, chosen = state.stateFilter;
    var row = !chosen && (rowsFor("", state.period) || {})[code];
    return {
      className: "state-base state-" + code,
      fillColor: chosen ? "#e3e8ef" : row && COLOUR[row.level] ? COLOUR[row.level] : NO_DATA,
      fillOpacity: chosen === code ? 0 : chosen ? 1 : 0.9,
      color: chosen ? "#8a93a3" : "#ffffff", weight: chosen ? 1 : 0.5,
    };
  }

  function drawMap(stateOutlines) {
    state.map = L.map("map", {
      attributionControl: false, zoomSnap: 0.25, minZoom: 4, maxZoom: 11,
      preferCanvas: false, keyboard: true,
    });
    L.control.attribution({ prefix: false })
      .addAttribution('Outlines: eHealth Africa / GRID3, OCHA · <a href="/docs/attribution.html">sources</a>')
      .addTo(state.map);
    // The base layer is the states (no tiles from another host): coloured by risk in the country
    // view, grey beneath a chosen state's LGAs; their edges are drawn again above the LGAs, so
    // state borders stay visible over the choropleth.
    state.map.createPane("states-base").style.zIndex = 350;
    state.map.createPane("states-lines").style.zIndex = 450;
    state.map.getPane("states-lines").style.pointerEvents = "none";
    state.statesLayer = L.geoJSON(stateOutlines, {
      pane: "states-base", style: stateStyle,
      onEachFeature: function (f, layer) {
        var code = f.properties.state_code;
        state.stateLayers[code] = layer;
        layer.on("click", function () { if (code !== state.stateFilter) chooseState(code); });
        layer.on("mouseover", function () { if (!state.stateFilter) hover(code); });
        layer.on("mouseout", function () { hover(null); });
      },
    }).addTo(state.map);
    state.stateLines = L.geoJSON(stateOutlines, {
      pane: "states-lines", interactive: false, style: stateLineStyle,
    }).addTo(state.map);
    document.querySelectorAll("#map path").forEach(function (p) { p.setAttribute("aria-hidden", "true"); });
    state.map.fitBounds(state.statesLayer.getBounds());
    $("map").setAttribute("aria-label", "Map of the 37 states coloured by risk level; choose a state for its LGAs. " +
      "Use the Area and LGA lists above the map to choose with the keyboard.");
  }

  /** The chosen state's LGAs on the map (drawn afresh for each state chosen). */
  function drawLgas(code, outlines) {
    if (state.lgaLayer) state.map.removeLayer(state.lgaLayer);
    if (state.chosenLine) state.map.removeLayer(state.chosenLine);
    state.layers = {};
    state.lgaLayer = L.geoJSON(outlines, {
      // the class names each LGA's shape (lga-<code>) for tests and user styles
      style: function (f) {
        return Object.assign({ className: "lga lga-" + f.properties.lga_code }, styleFor(f.properties.lga_code));
      },
      onEachFeature: function (f, layer) {
        var c = f.properties.lga_code;
        state.layers[c] = layer;
        layer.on("click", function () { selectLga(c); });
        layer.on("mouseover", function () { hover(c); });
        layer.on("mouseout", function () { hover(null); });
      },
    }).addTo(state.map);
    // the state's edge from the same simplified LGAs, so it lies exactly on theirs
    state.chosenLine = L.geoJSON({ type: "Feature", properties: { state_code: code }, geometry: outlines.state_outline }, {
      pane: "states-lines", interactive: false,
      style: { className: "state-outline state-chosen", fill: false, color: "#000000", weight: 2.2, opacity: 0.9 },
    }).addTo(state.map);
    document.querySelectorAll("#map path.lga").forEach(function (p) { p.setAttribute("aria-hidden", "true"); });
    if (state.layers[state.selected]) state.layers[state.selected].bringToFront();
    state.map.fitBounds(state.lgaLayer.getBounds(), { padding: [10, 10] });
    $("map").setAttribute("aria-label", "Map of the " + Object.keys(state.layers).length + " LGAs of " +
      state.stateNames[code] + " coloured by risk level. Use the LGA list above the map to choose one with the keyboard.");
  }

  function clearLgas() {
    if (state.lgaLayer) state.map.removeLayer(state.lgaLayer);
    if (state.chosenLine) state.map.removeLayer(state.chosenLine);
    state.lgaLayer = state.chosenLine = null;
    state.layers = {};
    state.map.fitBounds(state.statesLayer.getBounds());
  }

  /** The map takes the rest of the first screen below the controls, so the whole of it is seen
   * without scrolling on a laptop or a phone (within a smallest and a largest useful height). */
  function fitMapHeight() {
    var el = $("map"), top = el.getBoundingClientRect().top + window.scrollY;
    var rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
    el.style.height = Math.round(Math.max(15 * rem, Math.min(window.innerHeight - top - 0.75 * rem, 46 * rem))) + "px";
  }

  function refit() {
    if (!state.map) return;
    fitMapHeight();
    state.map.invalidateSize();
  }

  /** State edges; in a state view the chosen one is drawn from its own file (state.chosenLine). */
  function stateLineStyle(f) {
    var chosen = f.properties.state_code === state.stateFilter;
    return { className: "state-outline state-line-" + f.properties.state_code, fill: false,
      color: "#3a4250", weight: 1.2, opacity: chosen ? 0 : state.stateFilter ? 0.5 : 0.9 };
  }

  function recolour() {
    // the legend says what the colours mean now: ranks within the chosen state, or levels
    var byRank = !!(state.byRank && state.stateFilter);
    $("rank-legend").hidden = !byRank;
    $("level-legend").hidden = byRank;
    if (!state.map) return;
    Object.keys(state.layers).forEach(function (code) { state.layers[code].setStyle(styleFor(code)); });
    state.statesLayer.setStyle(stateStyle);
    state.stateLines.setStyle(stateLineStyle);
  }

  /** Shows the view's month once its figures are here; the page says which (data-view, data-period).
   * A month not seen yet is asked for once the slider rests (QUIET ms): dragging across the years
   * costs one request, not one per month passed, so the key's per-minute limit is not spent on it.
   * Until then the colours of the month before are dimmed (class `stale`). */
  function refresh() {
    var view = state.stateFilter, period = state.period;
    var here = rowsFor(view, period) || (isForecast(period) && state.forecastScope === false);
    clearTimeout(state.pending);
    $("map").classList.toggle("stale", !here);
    var go = function () {
      riskFor(view, period).then(function () {
        if (view !== state.stateFilter || period !== state.period) return; // moved on since
        if (view && !state.lgaLayer) return; // the outlines are still on their way
        $("map").classList.remove("stale");
        recolour();
        if (state.selected) showDetails(state.selected);
        renderTable();
        status(isForecast(period) && state.forecastScope === false
          ? "Forecast months need a key with the forecasts scope: no figures are shown for them." : "");
        document.body.dataset.view = view;
        document.body.dataset.period = period;
      }).catch(function (err) { status(explain(err), true); });
    };
    if (here) go();
    else state.pending = setTimeout(go, QUIET);
  }

  function hover(code) {
    var el = $("hover");
    if (!code) { el.textContent = ""; return; }
    var r = (rowsFor(state.stateFilter, state.period) || {})[code];
    var name = state.stateFilter ? (state.gazetteer[code] || {}).lga + ", " + state.stateNames[state.stateFilter]
      : state.stateNames[code] + " (state)";
    el.textContent = name + ": " + (r ? levelLabel(r.level) + " (score " + r.score + ")" : "no figure");
  }

  // --- controls --------------------------------------------------------------------------

  function setupControls() {
    var slider = $("month");
    slider.min = 0; slider.max = state.periods.length - 1;
    var firstForecast = state.periods.findIndex(isForecast);
    // opens on the latest estimated month, as the API's default period
    var last = state.periods.indexOf(state.period);
    slider.value = last;
    slider.disabled = false;
    if (firstForecast >= 0) {
      var share = 100 * firstForecast / Math.max(1, state.periods.length - 1);
      $("forecast-band").style.left = share + "%";
      $("forecast-band").hidden = false;
    }
    $("slider-ends").textContent = state.periods[0] + " … " + state.periods[state.periods.length - 1] +
      (firstForecast >= 0 ? "; forecast months from " + state.periods[firstForecast] + " (shaded)" : "");
    slider.addEventListener("input", function () { setPeriod(state.periods[Number(slider.value)]); });
    showMonth(state.period); // before the map takes the rest of the screen

    var select = $("state-filter");
    var names = state.stateNames;
    Object.keys(names).sort(function (a, b) { return names[a].localeCompare(names[b]); }).forEach(function (c) {
      var o = document.createElement("option");
      o.value = c; o.textContent = names[c] + " (" + c + ")";
      select.appendChild(o);
    });
    select.disabled = false;
    select.addEventListener("change", function () { setState(select.value); });
    $("lga-select").addEventListener("change", function () { if (this.value) selectLga(this.value); });
    $("by-rank").addEventListener("change", function () {
      state.byRank = this.checked;
      recolour();
    });
    fillLgaSelect();
  }

  function showMonth(period) {
    var label = $("month-label");
    label.textContent = monthText(period);
    label.title = monthWords(period);
    label.className = isForecast(period) ? "forecast" : "";
    $("month").setAttribute("aria-valuetext", monthText(period));
  }

  function setPeriod(period) {
    state.period = period;
    showMonth(period);
    updateExport();
    if (state.charts["history-chart"]) state.charts["history-chart"].update("none"); // moves the month marker
    refresh();
  }

  function chooseState(code) {
    $("state-filter").value = code;
    setState(code);
  }

  function setState(code) {
    state.stateFilter = code;
    delete document.body.dataset.view;
    if (state.selected && (state.gazetteer[state.selected] || {}).state_code !== code) clearSelection();
    fillLgaSelect();
    updateExport();
    if (!code) {
      clearLgas();
      recolour();
      smcShow();
      refresh();
      if (!state.selected) $("charts").hidden = true; // back to the whole country: nothing chosen
      return;
    }
    recolour();
    smcShow();
    loadStateCharts(code);
    Promise.all([lgaOutlines(code), riskFor(code, state.period)]).then(function (res) {
      if (state.stateFilter !== code) return; // another state chosen since
      drawLgas(code, res[0]);
      refresh();
    }).catch(function (err) { status(explain(err), true); });
  }

  function lgasInView() {
    return Object.keys(state.gazetteer).filter(function (c) {
      return !state.stateFilter || state.gazetteer[c].state_code === state.stateFilter;
    }).sort(function (a, b) {
      var ga = state.gazetteer[a], gb = state.gazetteer[b];
      return (ga.state + ga.lga).localeCompare(gb.state + gb.lga);
    });
  }

  function fillLgaSelect() {
    var sel = $("lga-select");
    sel.textContent = "";
    var first = document.createElement("option");
    first.value = ""; first.textContent = "Choose an LGA …";
    sel.appendChild(first);
    lgasInView().forEach(function (c) {
      var g = state.gazetteer[c], o = document.createElement("option");
      o.value = c; o.textContent = g.lga + (state.stateFilter ? "" : ", " + g.state);
      if (c === state.selected) o.selected = true;
      sel.appendChild(o);
    });
    sel.disabled = false;
  }

  // --- details and the map's table view ---------------------------------------------------

  /** An LGA: its state's view (opened first when another is shown), its figures and charts. */
  function selectLga(code) {
    var previous = state.selected, home = (state.gazetteer[code] || {}).state_code;
    state.selected = code;
    if (home && home !== state.stateFilter) {
      chooseState(home); // draws the LGAs with this one outlined
    } else {
      if (previous && state.layers[previous]) state.layers[previous].setStyle(styleFor(previous));
      if (state.layers[code]) { state.layers[code].setStyle(styleFor(code)); state.layers[code].bringToFront(); }
    }
    if ($("lga-select").value !== code) $("lga-select").value = code;
    showDetails(code);
    loadCharts(code);
    showProjection(code);
    smcShow();
  }

  // --- "last month's confirmed cases": project.js, loaded on the first area panel only --------------

  var scripts = {}; // file beside map.js -> promise of its loading (once)
  function loadScript(name) {
    if (!scripts[name]) {
      scripts[name] = new Promise(function (ok, fail) {
        var s = document.createElement("script");
        s.src = SCRIPT_BASE + name;
        s.onload = ok;
        s.onerror = fail;
        document.head.appendChild(s);
      });
      scripts[name].catch(function () { delete scripts[name]; });
    }
    return scripts[name];
  }

  function showProjection(code) {
    var g = state.gazetteer[code] || {};
    // the chart library loads with the first chart (chartLib); the form draws its range once it is there
    Promise.all([loadScript("project.js"), chartLib().catch(function () { /* a table without the chart */ })]).then(function () {
      window.MalariaProject.show($("project-panel"), { lga: code, state: g.state_code, name: g.lga || code,
        api: api, explain: explain });
    }).catch(function () { /* the form is an extra: the panel works without it */ });
  }

  // --- "SMC planning": smc.js, loaded when its layer is first switched on ----------------------

  // It draws its own layer above the risk colours, from the outlines the map already has.
  function smcHooks() {
    return { api: api, explain: explain, base: BASE, panel: $("smc-panel"), map: state.map,
      view: function () { return { state: state.stateFilter, lga: state.selected, gazetteer: state.gazetteer }; },
      outlines: function (code) { return code ? lgaOutlines(code) : Promise.resolve(state.statesLayer.toGeoJSON()); } };
  }
  function smcToggle() {
    var checked = $("smc-layer").checked;
    loadScript("smc.js").then(function () { return window.MalariaSmc.toggle(checked, smcHooks()); })
      .catch(function (err) { status(explain(err), true); });
  }
  function smcShow() {
    if (window.MalariaSmc && $("smc-layer") && $("smc-layer").checked) window.MalariaSmc.show(smcHooks());
  }

  function showDetails(code) {
    var g = state.gazetteer[code] || {}, rows = rowsFor(g.state_code, state.period), r = (rows || {})[code];
    var none = rows ? "no figure" : "…"; // "…": the month's figures are on their way
    var box = $("details");
    box.hidden = false;
    $("d-name").textContent = (g.lga || code) + ", " + (g.state || "");
    var fields = {
      lga_code: code, period: monthText(state.period),
      score: r ? r.score : none,
      range: r ? r.score_low + " – " + r.score_high : none,
      level: r ? levelText(r) : none,
      rank: !r ? none : !r.rank ? "no figure" : r.rank + " of " + Object.keys(rows).length + (r.rank_low != null
        ? " (80 % range " + r.rank_low + "–" + r.rank_high + ")" : " (range withheld: the survey cannot rank this state's LGAs)"),
      evidence: !r ? none : r.evidence ? r.evidence + (r.survey_children_2018_band ? " (survey children 2018: " +
        r.survey_children_2018_band + ")" : "") : "no figure",
      population: r ? fmtInt(r.population) : none,
      is_urban: !r ? none : r.is_urban === true ? "urban" : r.is_urban === false ? "not urban" : "no figure",
    };
    Object.keys(fields).forEach(function (k) {
      var el = box.querySelector('[data-field="' + k + '"]');
      if (el) el.textContent = fields[k];
    });
    var data = function (v) { return v === null || v === undefined ? "" : String(v); };
    box.querySelector('[data-field="score"]').dataset.value = r ? data(r.score) : "";
    box.querySelector('[data-field="range"]').dataset.low = r ? data(r.score_low) : "";
    box.querySelector('[data-field="range"]').dataset.high = r ? data(r.score_high) : "";
    box.querySelector('[data-field="level"]').dataset.value = r ? data(r.level) : "";
    box.querySelector('[data-field="rank"]').dataset.value = r ? data(r.rank) : "";
    box.querySelector('[data-field="rank"]').dataset.low = r ? data(r.rank_low) : "";
    box.querySelector('[data-field="rank"]').dataset.high = r ? data(r.rank_high) : "";
    box.querySelector('[data-field="evidence"]').dataset.value = r ? data(r.evidence) : "";
    box.querySelector('[data-field="population"]').dataset.value = r ? data(r.population) : "";
    box.querySelector('[data-field="is_urban"]').dataset.value = r ? data(r.is_urban) : "";
  }

  /** The map's figures as a table: the states of the country view, or the chosen state's LGAs. */
  function renderTable() {
    var details = $("map-table");
    if (!details.open) return; // built when opened
    var view = state.stateFilter, rows = rowsFor(view, state.period) || {};
    var head = view ? ["LGA", "State", "LGA code", "Score", "80 % range", "Level"]
      : ["State", "Zone", "State code", "Score", "80 % range", "Level"];
    var tr = document.createElement("tr");
    head.forEach(function (h) { var th = document.createElement("th"); th.textContent = h; tr.appendChild(th); });
    details.querySelector("thead").textContent = "";
    details.querySelector("thead").appendChild(tr);
    var tbody = details.querySelector("tbody");
    tbody.textContent = "";
    $("map-table-caption").textContent = "Risk by " + (view ? "LGA, " : "state, ") + monthText(state.period) +
      (view ? ", " + $("state-filter").selectedOptions[0].textContent : ", all states");
    var codes = view ? lgasInView() : Object.keys(state.stateNames).sort(function (a, b) {
      return state.stateNames[a].localeCompare(state.stateNames[b]);
    });
    var frag = document.createDocumentFragment();
    codes.forEach(function (c) {
      var r = rows[c], row = document.createElement("tr");
      var first = view ? [state.gazetteer[c].lga, state.stateNames[view]] : [state.stateNames[c], r ? r.zone : ""];
      first.concat([c, r ? r.score : "", r ? r.score_low + " – " + r.score_high : "", r ? levelText(r) : ""])
        .forEach(function (v) { var td = document.createElement("td"); td.textContent = v; row.appendChild(td); });
      frag.appendChild(row);
    });
    tbody.appendChild(frag);
  }

  // --- charts ----------------------------------------------------------------------------

  /** Chart.js, loaded the first time a chart is drawn: the country view needs none of it. */
  function chartLib() {
    if (!state.chartLib) {
      state.chartLib = window.Chart ? Promise.resolve() : new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = BASE + "vendor/chart.js/chart.umd.js";
        s.onload = function () { resolve(); };
        s.onerror = function () { state.chartLib = null; reject(new Error("could not load the chart library")); };
        document.head.appendChild(s);
      });
    }
    return state.chartLib;
  }

  /** Seasons of a state's LGAs (/v1/transmission/lgas) and, once, the states' seasons and surveys. */
  function loadTransmission(stateCode) {
    if (!state.transmissionStates) {
      state.transmissionStates = api("/v1/transmission/states").then(function (doc) {
        var byState = {};
        doc.states.forEach(function (s) { byState[s.state_code] = s; });
        return byState;
      });
      state.transmissionStates.catch(function () { state.transmissionStates = null; });
    }
    var lgas = state.transmissionLgas[stateCode];
    if (!lgas) {
      lgas = state.transmissionLgas[stateCode] = api("/v1/transmission/lgas?state=" + stateCode).then(function (doc) {
        var byLga = {};
        doc.lgas.forEach(function (l) { byLga[l.lga_code] = l; });
        return byLga;
      });
      lgas.catch(function () { delete state.transmissionLgas[stateCode]; });
    }
    return Promise.all([state.transmissionStates, lgas, chartLib()]).then(function (res) {
      return { state: res[0], lga: res[1] };
    });
  }

  function chartError(err) { $("charts-status").textContent = explain(err); }

  function loadCharts(code) {
    var g = state.gazetteer[code] || {};
    $("charts").hidden = false;
    $("charts-status").textContent = "";
    loadHistory("lga", code);
    loadTransmission(g.state_code).then(function (t) {
      if (state.selected !== code) return; // another chosen since
      drawSeason(code, g, t);
      drawSurvey(g.state_code, t);
    }).catch(chartError);
  }

  function loadStateCharts(stateCode) {
    $("charts").hidden = false;
    $("charts-status").textContent = "";
    // a chosen LGA of this state keeps its own history; otherwise the chart shows the state's
    if (!state.selected || (state.gazetteer[state.selected] || {}).state_code !== stateCode) {
      state.selected && clearSelection();
      loadHistory("state", stateCode);
    }
    loadTransmission(stateCode).then(function (t) {
      if (state.stateFilter === stateCode) drawSurvey(stateCode, t);
    }).catch(chartError);
  }

  function clearSelection() {
    var previous = state.selected;
    state.selected = null;
    if (previous && state.layers[previous]) state.layers[previous].setStyle(styleFor(previous));
    $("details").hidden = true;
    $("project-panel").hidden = true;
    $("season-figure").hidden = true;
  }

  // --- the chosen area's score over time ----------------------------------------------------

  function historyPath(kind, code) {
    return kind === "lga" ? "/v1/history/lgas?lga=" + encodeURIComponent(code)
      : "/v1/history/states?state=" + encodeURIComponent(code);
  }

  /** The history route's answer for an LGA or a state: forecast months too when the key may read them. */
  function history(kind, code) {
    var path = historyPath(kind, code);
    if (!state.history[path]) {
      var asked = state.forecastScope === false ? api(path)
        : api(path + "&include=forecasts").then(function (h) { state.forecastScope = true; return h; }, function (err) {
          if (!(err instanceof ApiError && err.status === 403)) throw err;
          state.forecastScope = false; // the key lacks the forecasts scope: the estimated months only
          return api(path);
        });
      state.history[path] = asked;
      asked.catch(function () { delete state.history[path]; });
    }
    return state.history[path];
  }

  function loadHistory(kind, code) {
    state.shown = { kind: kind, code: code };
    Promise.all([history(kind, code), chartLib()]).then(function (res) {
      if (!state.shown || state.shown.kind !== kind || state.shown.code !== code) return; // chosen since
      drawHistory(kind, res[0]);
    }).catch(chartError);
  }

  /** A vertical line at the month the map shows (a plugin local to the history chart). */
  var monthMarker = {
    id: "monthMarker",
    afterDatasetsDraw: function (chart) {
      var i = chart.data.labels.indexOf(state.period);
      if (i < 0) return;
      var x = chart.scales.x.getPixelForValue(i), area = chart.chartArea, ctx = chart.ctx;
      ctx.save();
      ctx.strokeStyle = "#0b5c8a"; ctx.lineWidth = 1.5; ctx.setLineDash([2, 2]);
      ctx.beginPath(); ctx.moveTo(x, area.top); ctx.lineTo(x, area.bottom); ctx.stroke();
      ctx.restore();
    },
  };

  function drawHistory(kind, h) {
    var months = h.months || [];
    var name = kind === "lga" ? h.lga + ", " + h.state : h.state + " (state)";
    var lastEstimated = -1;
    months.forEach(function (m, i) { if (m.kind !== "forecast") lastEstimated = i; });
    var forecasts = months.length - 1 - lastEstimated;
    var num = function (v) { return v === null || v === undefined ? null : Number(v); };
    $("history-figure").hidden = false;
    $("history-title").textContent = "Risk score over time: " + name;
    $("history-figure").dataset.kind = kind;
    $("history-figure").dataset.code = kind === "lga" ? h.lga_code : h.state_code;
    var csv = historyPath(kind, kind === "lga" ? h.lga_code : h.state_code) +
      (state.forecastScope ? "&include=forecasts" : "") + "&format=csv";
    $("history-csv").dataset.path = csv;
    $("history-csv").dataset.name = "history_" + (kind === "lga" ? h.lga_code : h.state_code) + ".csv";
    $("history-request").textContent = "GET " + csv;
    $("history-note").textContent = months.length
      ? "Modelled score (0 to 1) each month, " + months[0].period + " to " + months[months.length - 1].period +
        ", with its 80 % range shaded (score_low to score_high)" +
        (forecasts ? "; the " + forecasts + " forecast months are dashed" : "") +
        ". The dotted line marks the month on the map." +
        (state.forecastScope === false ? " Forecast months need a key with the forecasts scope." : "")
      : "This release has no monthly scores for this area.";
    var datasets = [
      { label: "80 % range, low", data: months.map(function (m) { return num(m.score_low); }),
        borderWidth: 0, pointRadius: 0, fill: false },
      { label: "80 % range", data: months.map(function (m) { return num(m.score_high); }),
        borderWidth: 0, pointRadius: 0, backgroundColor: "rgba(59, 110, 165, 0.25)", fill: "-1" },
      { label: "Score, estimated", data: months.map(function (m, i) { return i <= lastEstimated ? num(m.score) : null; }),
        borderColor: "#1d2330", backgroundColor: "#1d2330", borderWidth: 1.5, pointRadius: 0 },
    ];
    if (forecasts) {
      datasets.push({ label: "Score, forecast", borderDash: [5, 3], borderColor: "#8a3b00", backgroundColor: "#8a3b00",
        borderWidth: 1.5, pointRadius: 2,
        // joined to the last estimated month so the line does not break
        data: months.map(function (m, i) { return i >= lastEstimated && lastEstimated >= 0 || m.kind === "forecast" ? num(m.score) : null; }) });
    }
    chart("history-chart", {
      type: "line",
      data: { labels: months.map(function (m) { return m.period; }), datasets: datasets },
      options: {
        interaction: { mode: "index", intersect: false },
        scales: {
          // from zero to a little above the highest value, so a low-risk area's months are not a flat line
          y: { min: 0, suggestedMax: 0.1, title: { display: true, text: "risk score (0 to 1)" } },
          // one label ("2026-06") per 80 px at most, so they never run together on a phone
          x: { ticks: { autoSkip: true, autoSkipPadding: 16, maxRotation: 0,
            maxTicksLimit: Math.max(3, Math.min(12, Math.floor($("history-chart").parentNode.clientWidth / 80))) } },
        },
        plugins: {
          // lines as lines, the band as a block; the band's lower edge has no entry of its own
          legend: { labels: {
            usePointStyle: true, pointStyleWidth: 28,
            generateLabels: function (c) {
              return Chart.defaults.plugins.legend.labels.generateLabels(c).filter(function (item) {
                return item.datasetIndex !== 0;
              }).map(function (item) {
                var ds = c.data.datasets[item.datasetIndex];
                item.pointStyle = item.datasetIndex === 1 ? "rect" : "line";
                if (item.datasetIndex === 1) item.strokeStyle = item.fillStyle;
                else { item.strokeStyle = ds.borderColor; item.lineWidth = 2; item.lineDash = ds.borderDash || []; }
                return item;
              });
            },
          } },
          tooltip: { filter: function (item) { return item.datasetIndex !== 0; } },
        },
      },
      plugins: [monthMarker],
    });
    fillTable("history-table", ["Month", "Kind", "Score", "Low", "High", "Level"], months.map(function (m) {
      return [m.period, m.kind, m.score, m.score_low, m.score_high, m.level === null ? null : levelLabel(m.level)];
    }));
  }

  function fillTable(id, header, rows) {
    var table = $(id);
    table.querySelector("thead").innerHTML = "";
    var tr = document.createElement("tr");
    header.forEach(function (h) { var th = document.createElement("th"); th.textContent = h; tr.appendChild(th); });
    table.querySelector("thead").appendChild(tr);
    var tbody = table.querySelector("tbody");
    tbody.textContent = "";
    rows.forEach(function (r) {
      var row = document.createElement("tr");
      r.forEach(function (v) { var td = document.createElement("td"); td.textContent = v === null ? "no figure" : v; row.appendChild(td); });
      tbody.appendChild(row);
    });
  }

  /** Shades the high-season months behind the bars (a plugin local to these charts). */
  var highSeasonShade = {
    id: "highSeasonShade",
    beforeDatasetsDraw: function (chart, args, opts) {
      var high = opts.months || [], x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
      if (!high.length) return;
      var step = x.width / 12;
      ctx.save();
      ctx.fillStyle = "rgba(240, 200, 60, 0.22)";
      high.forEach(function (m) { ctx.fillRect(x.getPixelForValue(m - 1) - step / 2, area.top, step, area.bottom - area.top); });
      ctx.restore();
    },
  };

  // --- export of the view ----------------------------------------------------------------

  function download(blob, name) {
    var url = URL.createObjectURL(blob), a = document.createElement("a");
    a.href = url; a.download = name;
    document.body.appendChild(a); a.click(); a.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
  }

  /** The API request whose answer is the view (area and month) as CSV, and the file's name. */
  function viewRequest() {
    var p = state.period, s = state.stateFilter;
    if (!isForecast(p)) {
      return s ? { path: "/v1/risk/lgas?state=" + s + "&period=" + p + "&format=csv", name: "risk_lgas_" + s + "_" + p + ".csv" }
        : { path: "/v1/risk/states?period=" + p + "&format=csv", name: "risk_states_" + p + ".csv" };
    }
    var h = state.horizon[p];
    if (!h) return null;
    var note = "; the API's answer holds the forecast months up to this one";
    return s ? { path: "/v1/forecasts/lgas?state=" + s + "&months=" + h + "&format=csv", name: "forecasts_lgas_" + s + "_" + h + "months.csv", note: note }
      : { path: "/v1/forecasts/states?months=" + h + "&format=csv", name: "forecasts_states_" + h + "months.csv", note: note };
  }

  function updateExport() {
    var req = viewRequest();
    $("export-csv").disabled = !req;
    $("export-note").textContent = req ? "CSV: GET " + req.path + (req.note || "") + "." : "";
  }

  function exportCsv() {
    var req = viewRequest();
    if (!req) return;
    api(req.path, "blob").then(function (blob) { download(blob, req.name); })
      .catch(function (err) { status(explain(err), true); });
  }

  function viewTitle() {
    var area = state.stateFilter ? $("state-filter").selectedOptions[0].textContent + ", its LGAs" : "Nigeria, all states";
    return "Malaria risk level · " + area + " · " + monthText(state.period);
  }

  /** Paints one of the map's SVG layers onto the canvas, shape by shape, from the paths' own data and
   * colours: no image is loaded, so nothing depends on what a content security policy allows for images. */
  function paintSvg(ctx, svg, box, top) {
    var r = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal;
    if (!vb || !vb.width || !vb.height) return;
    ctx.save();
    ctx.translate(r.left - box.left, top + r.top - box.top);
    ctx.scale(r.width / vb.width, r.height / vb.height);
    ctx.translate(-vb.x, -vb.y);
    ctx.lineJoin = "round"; ctx.lineCap = "round";
    svg.querySelectorAll("path").forEach(function (el) {
      var d = el.getAttribute("d");
      if (!d || d === "M0 0") return;
      var shape = new Path2D(d), fill = el.getAttribute("fill"), stroke = el.getAttribute("stroke");
      if (fill && fill !== "none") {
        ctx.globalAlpha = Number(el.getAttribute("fill-opacity") || 1);
        ctx.fillStyle = fill;
        ctx.fill(shape, el.getAttribute("fill-rule") === "evenodd" ? "evenodd" : "nonzero");
      }
      if (stroke && stroke !== "none" && Number(el.getAttribute("stroke-width") || 1) > 0) {
        ctx.globalAlpha = Number(el.getAttribute("stroke-opacity") || 1);
        ctx.strokeStyle = stroke;
        ctx.lineWidth = Number(el.getAttribute("stroke-width") || 1);
        ctx.stroke(shape);
      }
    });
    ctx.restore();
  }

  /** The map as drawn (its SVG layers, in pane order) with a title, the legend and the credits. */
  function exportPng() {
    var box = $("map").getBoundingClientRect(), w = Math.round(box.width), mh = Math.round(box.height);
    var head = 34, ratio = window.devicePixelRatio || 1;
    var canvas = document.createElement("canvas");
    // the legend's rows, laid out first so the image is as tall as a narrow (phone) map needs
    var measure = canvas.getContext("2d"), x = 8, row = 0, placed = [];
    measure.font = "12px system-ui, sans-serif";
    LEVELS.concat([{ label: "no figure", colour: NO_DATA }]).forEach(function (l) {
      var tw = measure.measureText(l.label).width;
      if (x > 8 && x + 22 + tw > w - 8) { x = 8; row++; }
      placed.push({ l: l, x: x, row: row });
      x += 20 + tw + 14;
    });
    var foot = 18 * (row + 1) + 36;
    canvas.width = w * ratio; canvas.height = (head + mh + foot) * ratio;
    var ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, w, head + mh + foot);
    ctx.fillStyle = "#1d2330"; ctx.font = "600 15px system-ui, sans-serif";
    ctx.fillText(viewTitle(), 8, 22, w - 16);
    ctx.fillStyle = "#eef3f7"; ctx.fillRect(0, head, w, mh);
    var svgs = Array.prototype.slice.call($("map").querySelectorAll(".leaflet-pane > svg"));
    svgs.sort(function (a, b) {
      return Number(getComputedStyle(a.parentNode).zIndex) - Number(getComputedStyle(b.parentNode).zIndex);
    });
    ctx.save();
    ctx.beginPath(); ctx.rect(0, head, w, mh); ctx.clip();
    svgs.forEach(function (svg) { paintSvg(ctx, svg, box, head); });
    ctx.restore();
    ctx.font = "12px system-ui, sans-serif";
    placed.forEach(function (p) {
      var y = head + mh + 18 + 18 * p.row;
      ctx.fillStyle = p.l.colour; ctx.fillRect(p.x, y - 10, 16, 11);
      ctx.strokeStyle = "#8a8f99"; ctx.lineWidth = 1; ctx.strokeRect(p.x, y - 10, 16, 11);
      ctx.fillStyle = "#1d2330"; ctx.fillText(p.l.label, p.x + 20, y);
    });
    ctx.fillStyle = "#5a6273";
    ctx.fillText("Modelled scores. Outlines: eHealth Africa / GRID3, OCHA. Release " + $("release-id").textContent,
      8, head + mh + 18 * (row + 1) + 20, w - 16);
    canvas.toBlob(function (blob) {
      if (!blob) { status("Could not make the PNG of the map.", true); return; }
      download(blob, "risk_map_" + (state.stateFilter || "all") + "_" + state.period + ".png");
    }, "image/png");
  }

  function chart(id, cfg) {
    if (state.charts[id]) state.charts[id].destroy();
    cfg.options = Object.assign({ animation: false, responsive: true, maintainAspectRatio: false }, cfg.options || {});
    state.charts[id] = new Chart($(id), cfg);
  }

  function drawSeason(code, g, t) {
    var l = t.lga[code];
    var rows = !l ? [] : l.seasonal_index.map(function (v, i) {
      return { month: i + 1, seasonal_index: v, typical_rainfall_mm: l.typical_rainfall_mm[i],
        high_season: l.high_months.indexOf(i + 1) >= 0 ? "true" : "false" };
    });
    var st = t.state[g.state_code];
    var stateIndex = st ? st.season.seasonal_index : [];
    var high = rows.filter(function (r) { return r.high_season === "true"; }).map(function (r) { return Number(r.month); });
    $("season-figure").hidden = false;
    $("season-title").textContent = "Seasonality: " + (g.lga || code) + " and " + (g.state || "its state");
    $("season-note").textContent = rows.length
      ? "High season of " + (g.lga || code) + " shaded: " + (high.length ? high.map(function (m) { return MONTH_NAMES[m - 1]; }).join(", ") : "none") + "."
      : "This release has no seasonality figures for this LGA.";
    chart("season-chart", {
      data: {
        labels: MONTH_NAMES,
        datasets: [
          { type: "bar", label: "Seasonal index, " + (g.lga || code), data: rows.map(function (r) { return Number(r.seasonal_index); }),
            backgroundColor: "#3b6ea5", yAxisID: "y" },
          { type: "line", label: "Seasonal index, " + (g.state || "state"), data: stateIndex,
            borderColor: "#1d2330", borderDash: [5, 3], pointRadius: 2, yAxisID: "y" },
          { type: "line", label: "Typical rainfall (mm), " + (g.lga || code), data: rows.map(function (r) { return Number(r.typical_rainfall_mm); }),
            borderColor: "#2a9d8f", backgroundColor: "#2a9d8f", pointRadius: 2, yAxisID: "rain" },
        ],
      },
      options: {
        scales: {
          y: { min: 0, max: 1, title: { display: true, text: "share of peak month" } },
          rain: { position: "right", min: 0, grid: { drawOnChartArea: false }, title: { display: true, text: "rainfall, mm" } },
        },
        plugins: {
          highSeasonShade: { months: high },
          // the shading is explained in the legend as in the caption
          legend: { onClick: legendClick, labels: { generateLabels: function (c) {
            var items = Chart.defaults.plugins.legend.labels.generateLabels(c);
            if (high.length) {
              items.push({ text: "High season (shaded)", fillStyle: "rgba(240, 200, 60, 0.45)",
                strokeStyle: "rgba(200, 160, 30, 0.8)", lineWidth: 1, hidden: false, datasetIndex: -1 });
            }
            return items;
          } } },
        },
      },
      plugins: [highSeasonShade],
    });
    fillTable("season-table", ["Month", "Seasonal index (LGA)", "Seasonal index (state)", "Typical rainfall, mm (LGA)", "High season (LGA)"],
      rows.map(function (r, i) {
        return [MONTH_NAMES[Number(r.month) - 1], r.seasonal_index, stateIndex[i] === undefined ? null : stateIndex[i],
          r.typical_rainfall_mm, r.high_season === "true" ? "yes" : "no"];
      }));
  }

  /** Legend clicks hide a dataset; an entry that explains a shading (no dataset) does nothing. */
  function legendClick(e, item, legend) {
    if (item.datasetIndex >= 0) Chart.defaults.plugins.legend.onClick.call(this, e, item, legend);
  }

  function drawSurvey(stateCode, t) {
    var st = t.state[stateCode];
    $("survey-figure").hidden = false;
    var trend = st ? st.survey_trend.slice().sort(function (a, b) { return a.survey_year - b.survey_year; }) : [];
    $("survey-title").textContent = "Survey positivity, " + (st ? st.state : stateCode);
    var ranged = trend.filter(function (e) { return e.low !== null && e.high !== null; }).length;
    $("survey-note").textContent = !trend.length ? "No survey figures for this state."
      : "Share of children aged 6–59 months who tested positive" + (ranged
        ? "; bars show the 95% range where the source gives one."
        : ". The source gives no 95% range for these rounds.");
    var labels = trend.map(function (e) { return e.survey + " (" + e.test + ")"; });
    var datasets = [
      { type: "line", label: "Positivity", data: trend.map(function (e) { return e.positivity; }),
        borderColor: "#b8420f", backgroundColor: "#b8420f", pointRadius: 4 },
    ];
    // the range is drawn (and in the legend) only where the source gives one, as the caption says
    if (ranged) {
      datasets.push({ type: "bar", label: "95% range", data: trend.map(function (e) { return e.low === null || e.high === null ? null : [e.low, e.high]; }),
        backgroundColor: "rgba(59, 110, 165, 0.35)", barPercentage: 0.3 });
    }
    chart("survey-chart", {
      data: { labels: labels, datasets: datasets },
      options: { scales: { y: { min: 0, suggestedMax: 0.7, title: { display: true, text: "share positive" } } } },
    });
    fillTable("survey-table", ["Survey", "Test", "Positivity", "Low (95%)", "High (95%)", "Children tested"],
      trend.map(function (e) {
        return [e.survey, e.test + (e.test_assumed ? " (assumed)" : ""), e.positivity, e.low, e.high, e.children_tested];
      }));
  }

  // --- go --------------------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", function () {
    $("map-table").addEventListener("toggle", renderTable);
    if ($("smc-layer")) $("smc-layer").addEventListener("change", smcToggle);
    $("export-csv").addEventListener("click", exportCsv);
    $("export-png").addEventListener("click", exportPng);
    $("history-csv").addEventListener("click", function () {
      var b = this;
      api(b.dataset.path, "blob").then(function (blob) { download(blob, b.dataset.name); }).catch(chartError);
    });
    var resizing = null;
    window.addEventListener("resize", function () { clearTimeout(resizing); resizing = setTimeout(refit, 150); });
    setupKey();
  });
})();
