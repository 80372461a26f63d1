// The inspector's only script, served from this origin. The pages work without it; it only adds
// a "select all" box to lists that have checkboxes.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const table of document.querySelectorAll("table.list")) {
    const head = table.querySelector("thead th.sel");
    const boxes = [...table.querySelectorAll("tbody td.sel input[type=checkbox]")];
    if (!head || boxes.length < 2) continue;
    const all = document.createElement("input");
    all.type = "checkbox";
    all.setAttribute("aria-label", "Select all");
    all.addEventListener("change", () => { for (const b of boxes) b.checked = all.checked; });
    head.replaceChildren(all);
  }
});
