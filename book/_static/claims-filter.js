// The claims page: filter the table of every claim by chapter, kind and verdict, or by text; a chapter's
// title row shows while any of its claims does. Plain DOM code with no dependencies, so that the page works offline.
document.addEventListener("DOMContentLoaded", () => {
  for (const table of document.querySelectorAll("table.claims-filter")) {
    const rows = [...table.tBodies[0].rows].filter(r => r.dataset.chapter);
    const heads = [...table.tBodies[0].rows].filter(r => r.dataset.chapterHead);
    const titles = Object.fromEntries(rows.map(r => [r.dataset.chapter, r.dataset.chapterTitle || r.dataset.chapter]));
    const bar = document.createElement("div");
    bar.className = "claims-filter-controls";
    const filters = {};
    for (const [key, label] of [["chapter", "Chapter"], ["kind", "Kind"], ["verdict", "Verdict"]]) {
      const values = [...new Set(rows.map(r => r.dataset[key]))].sort();
      const select = document.createElement("select");
      select.setAttribute("aria-label", label);
      select.dataset.filter = key;
      const name = v => key === "chapter" ? titles[v] : v;
      select.append(new Option(`${label}: all`, ""), ...values.map(v => new Option(name(v), v)));
      filters[key] = select;
      bar.append(select);
    }
    const text = document.createElement("input");
    text.type = "search";
    text.placeholder = "Text in id or statement";
    text.setAttribute("aria-label", "Text in id or statement");
    bar.append(text);
    const count = document.createElement("span");
    count.className = "claims-filter-count";
    bar.append(count);
    table.before(bar);
    const apply = () => {
      const needle = text.value.trim().toLowerCase();
      let shown = 0;
      for (const row of rows) {
        const keep = Object.entries(filters).every(([key, s]) => !s.value || row.dataset[key] === s.value)
          && (!needle || row.textContent.toLowerCase().includes(needle));
        row.hidden = !keep;
        shown += keep;
      }
      for (const head of heads) {
        head.hidden = !rows.some(r => !r.hidden && r.dataset.chapter === head.dataset.chapterHead);
      }
      count.textContent = `${shown} of ${rows.length} claims`;
    };
    for (const control of [...Object.values(filters), text]) control.addEventListener("input", apply);
    apply();
  }
});
