// Expands a VS Code snippet body the way a user who accepts every default
// would: placeholders become their defaults, a choice its first option (or
// the one `choose` picks: {tabstop: option}), and a tabstop repeated
// elsewhere ($2) the text of its placeholder. Used by manifest.js and
// snippets.js.
'use strict';

function expand(body, choose = {}) {
  const defaults = {};
  let text = [].concat(body).join('\n');
  for (let prev = ''; prev !== text;) {
    prev = text;
    text = text
      .replace(/\$\{(\d+):((?:[^${}]|\$\d+)*)\}/g, (_, n, d) => (defaults[n] = d))
      .replace(/\$\{(\d+)\|([^|]*)\|\}/g, (_, n, list) => (defaults[n] = n in choose ? choose[n] : list.split(',')[0]));
  }
  return text.replace(/\$(\d+)/g, (_, n) => defaults[n] || '');
}

// The choices of a body: [[tabstop, [options]]].
function choices(body) {
  return [...[].concat(body).join('\n').matchAll(/\$\{(\d+)\|([^|]*)\|\}/g)].map((m) => [m[1], m[2].split(',')]);
}

module.exports = { expand, choices };
