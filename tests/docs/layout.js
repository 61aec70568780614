// What overflows a page of the built site, as a list of one-line problems (tests/docs/test_site.py runs it in
// Chromium). checkCode: also report code blocks wider than their box (at a desktop width; on a phone they scroll).
(checkCode) => {
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) {
    problems.push(`the page scrolls sideways: ${root.scrollWidth} px in a ${root.clientWidth} px window`);
  }
  const content = document.querySelector(".md-content");
  if (content === null) return ["no .md-content article"];
  const right = content.getBoundingClientRect().right;
  for (const el of content.querySelectorAll("*")) {
    if (el.closest("pre, .md-typeset__scrollwrap, .md-typeset__table")) continue; // these scroll in their own box
    const box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > right + 1) {
      const text = el.textContent.trim().slice(0, 40);
      problems.push(`<${el.tagName.toLowerCase()}> "${text}" reaches ${Math.round(box.right - right)} px past the article`);
    }
  }
  if (checkCode) {
    for (const code of content.querySelectorAll("pre > code")) {
      if (code.scrollWidth > code.clientWidth + 1) {
        const text = code.textContent.trim().slice(0, 40);
        problems.push(`code block "${text}" is ${code.scrollWidth - code.clientWidth} px wider than its box`);
      }
    }
  }
  for (const th of content.querySelectorAll("th")) {
    const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (lines.size > 1) problems.push(`the table header "${th.textContent.trim()}" breaks inside "${word[0]}"`);
      }
    }
  }
  return problems;
};
