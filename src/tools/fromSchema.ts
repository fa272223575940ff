/**
 * The TypeScript type a JSON Schema describes, for `defineTool`: a tool's `execute` gets its
 * arguments typed from its `parameters` (written inline, no `as const` needed). Covers what tool
 * schemas use — object (properties, required), array (items), string, number, integer, boolean,
 * null, enum, const, anyOf/oneOf; anything else is `unknown`. ajv checks the arguments at run time
 * against the same schema, so the type and the check cannot disagree on what they share.
 * @module
 */

type Simplify<T> = { [K in keyof T]: T[K] } & {};

type ObjectOf<P, R> = Simplify<
  { -readonly [K in keyof P as K extends R ? K : never]: FromSchema<P[K]> } & { -readonly [K in keyof P as K extends R ? never : K]?: FromSchema<P[K]> }
>;

type Required<S> = S extends { readonly required: readonly (infer R)[] } ? R : never;

type ByType<S, T> = T extends 'string'
  ? string
  : T extends 'number' | 'integer'
    ? number
    : T extends 'boolean'
      ? boolean
      : T extends 'null'
        ? null
        : T extends 'array'
          ? S extends { readonly items: infer I }
            ? FromSchema<I>[]
            : unknown[]
          : T extends 'object'
            ? S extends { readonly properties: infer P }
              ? ObjectOf<P, Required<S>>
              : Record<string, unknown>
            : unknown;

/** The type of the values `S` accepts. */
export type FromSchema<S> = S extends { readonly const: infer C }
  ? C
  : S extends { readonly enum: readonly (infer E)[] }
    ? E
    : S extends { readonly anyOf: readonly (infer A)[] }
      ? FromSchema<A>
      : S extends { readonly oneOf: readonly (infer A)[] }
        ? FromSchema<A>
        : S extends { readonly type: infer T }
          ? T extends readonly (infer U)[]
            ? ByType<S, U>
            : ByType<S, T>
          : unknown;
