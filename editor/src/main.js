// Almanac's script editor: CodeMirror 6 over the page's <textarea id="source">.
// The textarea stays in the form (hidden) and is kept in step, so saving works exactly
// as without this file; without JavaScript, or if anything here fails, the textarea is the editor.
import { EditorState } from "@codemirror/state";
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection,
} from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import {
  bracketMatching, indentOnInput, syntaxHighlighting, foldGutter,
} from "@codemirror/language";
import { javascript } from "@codemirror/lang-javascript";
import { autocompletion, closeBrackets, closeBracketsKeymap, completionKeymap } from "@codemirror/autocomplete";
import { linter, lintGutter, setDiagnostics } from "@codemirror/lint";
import { searchKeymap } from "@codemirror/search";
import { editorTheme, editorHighlight } from "./theme.js";

function csrfToken() {
  try {
    return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRF-Token"] || "";
  } catch (e) {
    return "";
  }
}

// The page's CSP admits the editor's own <style> elements by this answer's nonce.
function styleNonce() {
  const meta = document.querySelector('meta[name="style-nonce"]');
  return meta ? meta.getAttribute("content") : "";
}

// The completion table (generated from the capability registry) as a tree of names.
function completionSource(table) {
  return (context) => {
    const word = context.matchBefore(/[\w$]+(?:\.[\w$]*)*|[\w$]*\.[\w$]*/);
    if (!word || (word.from === word.to && !context.explicit)) return null;
    const parts = word.text.split(".");
    const last = parts.pop();
    let node = { children: table.globals };
    for (const part of parts) {
      node = node.children && node.children[part];
      if (!node) return null;
    }
    if (!node.children) return null;
    const options = Object.keys(node.children).map((name) => {
      const item = node.children[name];
      return { label: name, type: item.type, detail: item.signature || "", info: item.doc || undefined };
    });
    return { from: word.to - last.length, options, validFor: /^[\w$]*$/ };
  };
}

function lineColumnPos(doc, line, column) {
  const l = doc.line(Math.min(Math.max(line || 1, 1), doc.lines));
  const from = Math.min(l.from + Math.max((column || 1) - 1, 0), l.to);
  return { from, to: Math.max(from, l.to) };
}

// Syntax checked as one types, by the server's own parser (POST /scripts/check).
function serverLinter(url, status) {
  return linter(async (view) => {
    const source = view.state.doc.toString();
    let answer;
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrfToken() },
        body: JSON.stringify({ source }),
        credentials: "same-origin",
      });
      answer = await response.json();
    } catch (e) {
      status.textContent = "Syntax check unavailable; the script is still checked on save.";
      return [];
    }
    if (view.state.doc.toString() !== source) return [];
    if (answer.ok) {
      status.textContent = "No syntax errors; the default export is there.";
      status.className = "hint syntax-ok";
      return [];
    }
    // {ok, message, line, column}, or an error envelope (expired session, too large a source).
    const problem = answer.error ? { message: answer.error.message } : answer;
    const message = problem.message || "The script does not parse.";
    const where = problem.line ? "Line " + problem.line + (problem.column ? ", column " + problem.column : "") + ": " : "";
    status.textContent = where + message;
    status.className = "hint syntax-bad";
    const range = lineColumnPos(view.state.doc, problem.line, problem.column);
    return [{ from: range.from, to: range.to, severity: "error", message }];
  }, { delay: 400 });
}

function mount(area) {
  const label = document.querySelector('label[for="' + area.id + '"]');
  if (label && !label.id) label.id = area.id + "-label";
  const status = document.createElement("p");
  status.id = "syntax-status";
  status.className = "hint";
  status.setAttribute("role", "status");
  status.setAttribute("aria-live", "polite");
  const table = JSON.parse(document.getElementById("almanac-api").textContent);
  const host = document.createElement("div");
  host.className = "cm-host";
  const box = area.closest(".editor") || area;
  box.parentNode.insertBefore(host, box.nextSibling);
  host.parentNode.insertBefore(status, host.nextSibling);
  const sync = EditorView.updateListener.of((update) => {
    if (update.docChanged) area.value = update.state.doc.toString();
  });
  const view = new EditorView({
    parent: host,
    state: EditorState.create({
      doc: area.value,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), foldGutter(), history(), drawSelection(),
        indentOnInput(), bracketMatching(), closeBrackets(), highlightActiveLine(),
        editorTheme, syntaxHighlighting(editorHighlight),
        javascript(),
        autocompletion({ override: [completionSource(table)], activateOnTyping: true }),
        lintGutter(),
        serverLinter(area.getAttribute("data-check-url"), status),
        keymap.of([...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap,
                   ...completionKeymap, indentWithTab]),
        EditorView.contentAttributes.of({
          "aria-labelledby": label ? label.id : "", "aria-multiline": "true", role: "textbox",
        }),
        sync,
        EditorView.cspNonce.of(styleNonce()),
      ],
    }),
  });
  box.hidden = true;
  box.classList.add("replaced");
  // A syntax error the server reported on save is shown at its line at once.
  const errLine = parseInt(area.getAttribute("data-error-line") || "0", 10);
  if (errLine) {
    const range = lineColumnPos(view.state.doc, errLine, 1);
    view.dispatch(setDiagnostics(view.state, [{ from: range.from, to: range.to, severity: "error",
      message: area.getAttribute("data-error-message") || "Syntax error" }]));
  }
  // Starter templates and restored versions replace the text through the textarea's event.
  area.addEventListener("almanac:set-source", () => {
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: area.value } });
  });
  window.almanacEditor = view;
  host.setAttribute("data-ready", "true");
}

function init() {
  const area = document.querySelector("textarea#source[data-check-url]");
  if (!area) return;
  try {
    mount(area);
  } catch (e) {
    // The textarea stays: a working editor without the extras.
    if (window.console) console.error("editor failed to start", e);
  }
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
