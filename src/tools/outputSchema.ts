/**
 * Output schemas (typed sub-agent results): the schema a parent sets when it spawns a child
 * (`spawn_agent`'s `output_schema`, or `start({ output })` in the API), which the agent's finish
 * call's `value` must match. A JSON Schema is compiled with the project's ajv; a Standard Schema
 * (zod 4, valibot, …) validates in-process, and what is persisted is its JSON Schema form when it
 * offers one (`~standard.jsonSchema`), else `{}` (any JSON value). After a resume only the
 * persisted JSON Schema is checked: a Standard Schema's refinements and transforms are not.
 * @module
 */
import { TroupeError } from '../errors.js';
import type { JsonSchema } from '../model/types.js';
import { compileValidator, validationErrors } from './defineTool.js';
import type { FromSchema } from './fromSchema.js';
import type { StandardJSONSchemaConverter, StandardSchemaV1 } from './standardSchema.js';

/** Largest output schema accepted, as JSON (it is persisted with the agent and shown to its model). */
export const MAX_OUTPUT_SCHEMA_BYTES = 32_768;

/** A finish call's value checked: the value to keep (a Standard Schema's output), or what is wrong. */
type OutputResult = { ok: true; value: unknown } | { ok: false; errors: string[] };

export interface OutputCheck {
  /** The JSON Schema the agent's model is shown for `value`, and what is persisted. */
  readonly schema: JsonSchema;
  check(value: unknown): OutputResult | Promise<OutputResult>;
}

/** What an API caller may give as an output schema. */
export type OutputSchema = JsonSchema | StandardSchemaV1;

/** The type of a value valid against `S`: a Standard Schema's output, else what a `const` JSON Schema describes. */
export type OutputOf<S> = S extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<S> : FromSchema<S>;

export const isStandardSchema = (schema: unknown): schema is StandardSchemaV1 =>
  typeof schema === 'object' && schema !== null && typeof (schema as { '~standard'?: { validate?: unknown } })['~standard']?.validate === 'function';

const invalid = (why: string) => new TroupeError('TOOL_INPUT_INVALID', `The output schema is invalid: ${why}`);

/**
 * Compile a JSON Schema as an output schema; throws TOOL_INPUT_INVALID saying why it cannot be one
 * (not an object, larger than MAX_OUTPUT_SCHEMA_BYTES, or not a schema ajv compiles). Its top-level
 * `$schema` and `$id` are not compiled: ajv knows draft-07 only, and an `$id` would clash with the
 * same schema compiled for a sibling.
 */
export function compileOutputSchema(schema: unknown): OutputCheck {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) throw invalid('expected a JSON Schema object');
  let text: string;
  try {
    text = JSON.stringify(schema);
  } catch (err) {
    throw invalid(`it is not JSON (${(err as Error).message})`);
  }
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_OUTPUT_SCHEMA_BYTES) throw invalid(`it is ${bytes} bytes as JSON; at most ${MAX_OUTPUT_SCHEMA_BYTES} are accepted`);
  // A fresh copy: ajv keeps the object it compiled, and the caller's may change later.
  const { $schema: _draft, $id: _id, ...rest } = JSON.parse(text) as JsonSchema;
  let validate: ReturnType<typeof compileValidator>;
  try {
    validate = compileValidator(rest, true);
  } catch (err) {
    throw invalid((err as Error).message);
  }
  return {
    schema: rest,
    check: (value) => (validate(value) ? { ok: true, value } : { ok: false, errors: validationErrors(validate, '(value)') }),
  };
}

/** A Standard Schema's JSON Schema form (draft-07), or `{}` when it offers none that ajv compiles. */
function jsonFormOf(schema: StandardSchemaV1): JsonSchema {
  const converter = (schema['~standard'] as { jsonSchema?: StandardJSONSchemaConverter }).jsonSchema;
  if (typeof converter?.output !== 'function') return {};
  try {
    return compileOutputSchema(converter.output({ target: 'draft-07' })).schema;
  } catch {
    return {};
  }
}

const issuePath = (issue: StandardSchemaV1.Issue) =>
  issue.path && issue.path.length > 0 ? `/${issue.path.map((p) => String(typeof p === 'object' ? p.key : p)).join('/')}` : '(value)';

/** An output check from a Standard Schema: validated in-process, persisted as its JSON Schema form. */
function standardOutput(schema: StandardSchemaV1): OutputCheck {
  const check = async (value: unknown): Promise<OutputResult> => {
    const result = await schema['~standard'].validate(value);
    if (result.issues) return { ok: false, errors: result.issues.map((i) => `${issuePath(i)} ${i.message}`) };
    return { ok: true, value: result.value };
  };
  return { schema: jsonFormOf(schema), check };
}

/** Either kind of output schema, as a check; throws TOOL_INPUT_INVALID for an invalid JSON Schema. */
export const outputCheckOf = (schema: OutputSchema): OutputCheck => (isStandardSchema(schema) ? standardOutput(schema) : compileOutputSchema(schema));
