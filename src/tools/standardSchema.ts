/**
 * The Standard Schema v1 interface (https://standardschema.dev), copied from `@standard-schema/spec`
 * 1.1.0 (MIT, © Colin McDonnell, Fabian Hiller, Ryan Carniato and contributors): a types-only
 * package, so troupe takes the few lines it needs instead of a dependency. zod 4, valibot, arktype
 * and others implement it; troupe validates a value with `~standard.validate` and types a result with
 * `InferOutput`. `StandardJSONSchemaV1` is the companion that converts a schema to JSON Schema.
 * @module
 */

/** A schema any Standard Schema library makes (zod 4: every schema). */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': StandardSchemaV1.Props<Input, Output>;
}

// eslint-disable-next-line @typescript-eslint/no-namespace -- the spec's own shape, so `StandardSchemaV1.InferOutput<S>` reads as it does there
export declare namespace StandardSchemaV1 {
  interface Props<Input = unknown, Output = Input> {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (
      value: unknown,
      options?: { readonly libraryOptions?: Record<string, unknown> | undefined },
    ) => Result<Output> | Promise<Result<Output>>;
    readonly types?: Types<Input, Output> | undefined;
  }
  type Result<Output> = SuccessResult<Output> | FailureResult;
  interface SuccessResult<Output> {
    readonly value: Output;
    readonly issues?: undefined;
  }
  interface FailureResult {
    readonly issues: readonly Issue[];
  }
  interface Issue {
    readonly message: string;
    readonly path?: readonly (PropertyKey | PathSegment)[] | undefined;
  }
  interface PathSegment {
    readonly key: PropertyKey;
  }
  interface Types<Input = unknown, Output = Input> {
    readonly input: Input;
    readonly output: Output;
  }
  type InferOutput<Schema extends StandardSchemaV1> = NonNullable<Schema['~standard']['types']>['output'];
}

/** The JSON Schema converter a Standard Schema may also offer (`~standard.jsonSchema`, spec 1.1). */
export interface StandardJSONSchemaConverter {
  readonly output: (options: { readonly target: 'draft-2020-12' | 'draft-07' | 'openapi-3.0' | (object & string) }) => Record<string, unknown>;
}
