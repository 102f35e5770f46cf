// Almanac's only script besides htmx: no build step, nothing required for the pages to work.
(function () {
  "use strict";
  // The server shows times in the viewer's zone when it knows it; this is how it knows.
  try {
    var tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (tz && document.cookie.indexOf("tz=" + encodeURIComponent(tz)) < 0) {
      document.cookie = "tz=" + encodeURIComponent(tz) + "; path=/; max-age=31536000; samesite=lax";
    }
  } catch (e) { /* an old browser keeps UTC */ }

  // Line numbers beside a code textarea: a gutter that follows its scrolling.
  function numberLines(area) {
    var gutter = area.parentNode.querySelector(".gutter");
    if (!gutter) return;
    var errLine = parseInt(area.getAttribute("data-error-line") || "0", 10);
    function draw() {
      var count = area.value.split("\n").length;
      var out = [];
      for (var i = 1; i <= count; i++) {
        out.push(i === errLine ? '<span class="err">' + i + "</span>" : String(i));
      }
      gutter.innerHTML = out.join("\n");
      gutter.scrollTop = area.scrollTop;
    }
    area.addEventListener("input", draw);
    area.addEventListener("scroll", function () { gutter.scrollTop = area.scrollTop; });
    // Tab indents instead of leaving the field; Escape then Tab still leaves it (keyboard users).
    var escaped = false;
    area.addEventListener("keydown", function (ev) {
      if (ev.key === "Escape") { escaped = true; return; }
      if (ev.key === "Tab" && !ev.shiftKey && !escaped) {
        ev.preventDefault();
        var s = area.selectionStart;
        area.value = area.value.slice(0, s) + "  " + area.value.slice(area.selectionEnd);
        area.selectionStart = area.selectionEnd = s + 2;
        draw();
      }
      escaped = false;
    });
    draw();
  }
  // A table wider than its box scrolls inside it; make that box reachable by keyboard (arrow keys
  // scroll it) and named for screen readers, but only when it does overflow.
  function scrollBoxes(root) {
    var boxes = (root || document).querySelectorAll(".scroll");
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      if (box.scrollWidth > box.clientWidth + 1) {
        // A chart reads left to right in days: on a narrow screen show the newest days first.
        if (box.closest(".chart") && !box.hasAttribute("data-scrolled")) {
          box.setAttribute("data-scrolled", "");
          box.scrollLeft = box.scrollWidth;
        }
        box.setAttribute("tabindex", "0");
        box.setAttribute("role", "region");
        if (!box.hasAttribute("aria-label")) box.setAttribute("aria-label", "Table (scrolls sideways)");
      } else if (box.getAttribute("tabindex") === "0") {
        box.removeAttribute("tabindex");
        box.removeAttribute("role");
      }
    }
  }
  // The rule builder: show only the fields that mean something for the chosen frequency
  // (the stylesheet does it with :has(); this covers browsers without it).
  function frequencyFields() {
    var freq = document.getElementById("freq");
    if (!freq) return;
    function toggle() {
      var parts = document.querySelectorAll("[data-freqs]");
      for (var i = 0; i < parts.length; i++) {
        parts[i].hidden = (" " + parts[i].getAttribute("data-freqs") + " ").indexOf(" " + freq.value + " ") < 0;
      }
    }
    freq.addEventListener("change", toggle);
    toggle();
  }
  // Copy buttons beside a value shown once (a new token, an invitation link). Hidden in the page,
  // shown here: without script the value is still there to select by hand.
  function copyButtons() {
    var buttons = document.querySelectorAll("button.copy[data-copy]");
    for (var i = 0; i < buttons.length; i++) {
      var button = buttons[i];
      button.hidden = false;
      button.addEventListener("click", function (ev) {
        var btn = ev.currentTarget;
        var source = document.getElementById(btn.getAttribute("data-copy"));
        var status = btn.parentNode.querySelector("[role=status]");
        var text = source ? source.textContent.trim() : "";
        function said(message) { if (status) status.textContent = message; }
        function byHand() {
          var range = document.createRange();
          range.selectNodeContents(source);
          var sel = window.getSelection();
          sel.removeAllRanges();
          sel.addRange(range);
          said(document.execCommand && document.execCommand("copy") ? "Copied." : "Selected: press Ctrl+C (or ⌘C) to copy.");
        }
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(function () { said("Copied."); }, byHand);
        } else {
          byHand();  // plain http on another host: the clipboard API is not offered there
        }
      });
    }
  }
  function init() {
    frequencyFields();
    copyButtons();
    var areas = document.querySelectorAll("textarea.code");
    for (var i = 0; i < areas.length; i++) numberLines(areas[i]);
    scrollBoxes();
    window.addEventListener("resize", function () { scrollBoxes(); });
    document.body.addEventListener("htmx:afterSettle", function () { scrollBoxes(); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
