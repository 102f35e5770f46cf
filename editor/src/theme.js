// The editor's look, light and dark: every colour is a CSS variable (`--cm-*`) whose two values,
// light and dark, live in almanac/web/static/style.css beside the page's own palette. The page
// follows the person's preference with no JavaScript, and the editor follows the page the same way;
// tests/unit/web/test_editor_theme.py checks each token colour's contrast against the editor's
// background in both palettes.
import { EditorView } from "@codemirror/view";
import { HighlightStyle } from "@codemirror/language";
import { tags as t } from "@lezer/highlight";

export const editorTheme = EditorView.theme({
  "&": { color: "var(--cm-fg)", backgroundColor: "var(--cm-bg)" },
  ".cm-content": { caretColor: "var(--cm-cursor)" },
  ".cm-cursor, .cm-dropCursor": { borderLeftColor: "var(--cm-cursor)", borderLeftWidth: "2px" },
  "&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground, .cm-selectionBackground, .cm-content ::selection":
    { backgroundColor: "var(--cm-selection)" },
  ".cm-activeLine": { backgroundColor: "var(--cm-active-line)" },
  ".cm-gutters": { backgroundColor: "var(--cm-gutter-bg)", color: "var(--cm-gutter-fg)", borderRight: "1px solid var(--cm-gutter-line)" },
  ".cm-activeLineGutter": { backgroundColor: "var(--cm-active-line)", color: "var(--cm-fg)" },
  "&.cm-focused .cm-matchingBracket": { backgroundColor: "var(--cm-bracket)", outline: "1px solid var(--cm-gutter-fg)" },
  ".cm-foldPlaceholder": { backgroundColor: "var(--cm-gutter-bg)", color: "var(--cm-gutter-fg)", border: "1px solid var(--cm-gutter-line)" },
  ".cm-tooltip": { backgroundColor: "var(--cm-gutter-bg)", color: "var(--cm-fg)", border: "1px solid var(--cm-gutter-line)" },
  ".cm-tooltip-autocomplete ul li[aria-selected]": { backgroundColor: "var(--cm-picked-bg)", color: "var(--cm-picked-fg)" },
  ".cm-completionDetail": { color: "var(--cm-gutter-fg)" },
  // On the picked option the detail takes the option's own colour: grey on the highlight would not read.
  ".cm-tooltip-autocomplete ul li[aria-selected] .cm-completionDetail": { color: "var(--cm-picked-fg)" },
  ".cm-panels": { backgroundColor: "var(--cm-gutter-bg)", color: "var(--cm-fg)" },
  ".cm-diagnostic-error": { borderLeftColor: "var(--cm-invalid)" },
});

// Each tag the JavaScript grammar emits, one colour each; `color:` values are what the contrast test reads.
export const editorHighlight = HighlightStyle.define([
  { tag: t.keyword, color: "var(--cm-keyword)" },
  { tag: [t.controlKeyword, t.moduleKeyword, t.operatorKeyword, t.definitionKeyword], color: "var(--cm-keyword)" },
  { tag: [t.atom, t.bool, t.null, t.number, t.literal], color: "var(--cm-number)" },
  { tag: [t.string, t.special(t.string)], color: "var(--cm-string)" },
  { tag: [t.regexp, t.escape], color: "var(--cm-regexp)" },
  { tag: [t.lineComment, t.blockComment, t.comment], color: "var(--cm-comment)", fontStyle: "italic" },
  { tag: [t.definition(t.variableName), t.function(t.definition(t.variableName))], color: "var(--cm-definition)" },
  { tag: [t.function(t.variableName), t.function(t.propertyName)], color: "var(--cm-function)" },
  { tag: [t.propertyName, t.definition(t.propertyName)], color: "var(--cm-property)" },
  { tag: [t.typeName, t.className, t.namespace], color: "var(--cm-type)" },
  { tag: [t.variableName, t.self, t.special(t.variableName)], color: "var(--cm-fg)" },
  { tag: [t.operator, t.punctuation, t.bracket, t.separator], color: "var(--cm-punctuation)" },
  { tag: [t.labelName, t.meta, t.documentMeta], color: "var(--cm-meta)" },
  { tag: t.invalid, color: "var(--cm-invalid)" },
  { tag: t.link, color: "var(--cm-function)", textDecoration: "underline" },
  { tag: t.strong, fontWeight: "bold" },
  { tag: t.emphasis, fontStyle: "italic" },
]);
