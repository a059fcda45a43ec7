// The new-key page's one enhancement: a copy button, and the whole key selected on focus.
// Without JavaScript the page still works: the key sits whole in a read-only field that a
// double-click selects. Served from the dashboard's own origin (CSP `script-src 'self'`).
(function () {
  "use strict";
  var field = document.getElementById("secret");
  var status = document.getElementById("copy-status");
  if (!field) return;
  field.addEventListener("focus", function () { field.select(); });
  var button = document.createElement("button");
  button.type = "button";
  button.id = "copy-key";
  button.textContent = "Copy the key";
  field.insertAdjacentElement("afterend", button);
  function said(text) { if (status) status.textContent = text; }
  button.addEventListener("click", function () {
    field.focus();
    field.select();
    var done = function () { said("Copied. Paste it where you keep secrets."); };
    var fallback = function () {
      try {
        if (document.execCommand("copy")) { done(); return; }
      } catch (e) { /* fall through */ }
      said("Copying is blocked here: the key is selected, copy it with your keyboard or menu.");
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(field.value).then(done, fallback);
    } else {
      fallback();
    }
  });
}());
