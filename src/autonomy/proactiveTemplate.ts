/**
 * The text side of a proactive trigger: rendering its prompt template, and the basename globs of a
 * file_change trigger. Both are total — a template never throws and a glob is always a valid
 * RegExp — because they run on every event, long after the config was accepted.
 * @module
 */

const PLACEHOLDER = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * Substitutes `${name}` and legacy `{name}` placeholders from `vars` in one pass (substituted
 * values are not expanded again). Never throws: unknown names and malformed placeholders
 * (`${oops`, `{`, `}{`, `{1x}`) stay exactly as written.
 */
export function renderTemplate(template: string, vars: Record<string, string>): string {
  try {
    return String(template).replace(PLACEHOLDER, (whole: string, braced?: string, legacy?: string) => {
      const key = braced ?? legacy ?? '';
      if (vars === null || typeof vars !== 'object' || !Object.hasOwn(vars, key)) return whole;
      const value: unknown = vars[key];
      return typeof value === 'string' ? value : String(value);
    });
  } catch {
    try {
      return String(template);
    } catch {
      return '';
    }
  }
}

/** A glob on a basename: `*` is any run of characters, `?` exactly one; everything else is literal. */
export function globToRegExp(glob: string): RegExp {
  let source = '';
  for (const ch of glob) {
    if (ch === '*') source += '.*';
    else if (ch === '?') source += '.';
    else source += ch.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return new RegExp(`^${source}$`, 'su');
}
