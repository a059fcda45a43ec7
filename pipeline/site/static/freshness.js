// Says, by the reader's own clock, when every forecast month of this release has passed: the data
// end at the latest estimated month and the next data load is due. Facts come from the page
// (data-last-estimated, data-last-forecast), written by the build from the release's /v1/periods.
"use strict";

function staleNote(lastEstimated, lastForecast, today) {
  // today: a Date; months compare as YYYY-MM text
  var month = today.getFullYear() + "-" + String(today.getMonth() + 1).padStart(2, "0");
  var last = /^\d{4}-\d{2}$/.test(lastForecast) ? lastForecast : lastEstimated;
  if (!/^\d{4}-\d{2}$/.test(last) || month <= last) return "";
  return "Today is " + month + ": every month of this release has passed. The data end at " + lastEstimated +
    " (the latest estimated month), with forecasts to " + last + "; the next data load is due.";
}

if (typeof document !== "undefined") {
  document.addEventListener("DOMContentLoaded", function () {
    var note = document.getElementById("stale-note");
    if (!note) return;
    var text = staleNote(note.dataset.lastEstimated, note.dataset.lastForecast, new Date());
    if (!text) return;
    note.textContent = text;
    note.hidden = false;
    // the map keeps its first screen: the note sits in the folded block, its gist on the visible line
    var flag = document.getElementById("stale-flag");
    if (flag) { flag.textContent = "; all past, next load due"; flag.hidden = false; }
  });
}
if (typeof module !== "undefined") module.exports = { staleNote: staleNote };
