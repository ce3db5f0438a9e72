/**
 * JSON text from a file a person edits (the config file, the forge config,
 * the webhook secrets), parsed so that a syntax error names the line and
 * column where it is: V8's JSON.parse gives a position only for some errors
 * (none for `[1,]` on Node 20), so the position comes from our own scan of
 * the grammar (RFC 8259), which runs only once JSON.parse has refused the
 * text; the reason is V8's, without its position.
 */

export type JsonParse = { ok: true; value: unknown } | { ok: false; line: number; column: number; reason: string }

export function parseJsonText(text: string): JsonParse {
  try {
    return { ok: true, value: JSON.parse(text) as unknown }
  } catch (err) {
    const offset = syntaxErrorOffset(text)
    const before = text.slice(0, offset)
    const line = before.split('\n').length
    const column = offset - (before.lastIndexOf('\n') + 1) + 1
    const reason = (err as Error).message.replace(/,? ?"[^]*" is not valid JSON$/, '').replace(/ in JSON at position \d+.*$/, '')
    return { ok: false, line, column, reason }
  }
}

/** The offset of the first character that makes `text` not JSON (text.length when it ends too early). */
export function syntaxErrorOffset(text: string): number {
  let i = 0
  const ws = (): void => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++
  }
  const fail = (at: number): never => {
    throw new SyntaxAt(at)
  }
  const literal = (word: string): void => {
    for (const ch of word) {
      if (text[i] !== ch) fail(i)
      i++
    }
  }
  const string = (): void => {
    i++ // the opening quote
    for (;;) {
      if (i >= text.length) fail(i)
      const ch = text.charCodeAt(i)
      if (ch === 0x22) {
        i++
        return
      }
      if (ch < 0x20) fail(i)
      if (ch === 0x5c) {
        const e = text[i + 1]
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) fail(i)
          i += 6
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) i += 2
        else fail(i)
      } else i++
    }
  }
  const number = (): void => {
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i))
    if (m === null || m[0] === '-' || m[0] === '') fail(i)
    i += m![0].length
  }
  const value = (): void => {
    ws()
    const ch = text[i]
    if (ch === undefined) return fail(i)
    if (ch === '{') {
      i++
      ws()
      if (text[i] === '}') {
        i++
        return
      }
      for (;;) {
        ws()
        if (text[i] !== '"') fail(i)
        string()
        ws()
        if (text[i] !== ':') fail(i)
        i++
        value()
        ws()
        if (text[i] === ',') i++
        else if (text[i] === '}') {
          i++
          return
        } else fail(i)
      }
    }
    if (ch === '[') {
      i++
      ws()
      if (text[i] === ']') {
        i++
        return
      }
      for (;;) {
        value()
        ws()
        if (text[i] === ',') i++
        else if (text[i] === ']') {
          i++
          return
        } else fail(i)
      }
    }
    if (ch === '"') return string()
    if (ch === 't') return literal('true')
    if (ch === 'f') return literal('false')
    if (ch === 'n') return literal('null')
    if (ch === '-' || (ch >= '0' && ch <= '9')) return number()
    fail(i)
  }
  try {
    value()
    ws()
    return i < text.length ? i : text.length
  } catch (err) {
    if (err instanceof SyntaxAt) return Math.min(err.at, text.length)
    throw err
  }
}

class SyntaxAt {
  constructor(readonly at: number) {}
}
