import type { ModelInfo } from "../../../client/models.ts";

/** One property of a model's input JSON Schema, as the form reads it. */
export type Property = ModelInfo["input_schema"]["properties"] extends
  | Record<string, infer P>
  | undefined
  ? P & { minimum?: number; maximum?: number; default?: unknown }
  : never;

/** One field per model parameter, from the model's input JSON Schema. */
export function ParamField(props: {
  name: string;
  schema: Property;
  value: unknown;
  onChange: (value: unknown) => void;
}) {
  const { name, schema } = props;
  const label = schema.description ? `${name}: ${schema.description}` : name;
  if (schema.enum)
    return (
      <label>
        {name}
        <select
          title={label}
          value={String(props.value ?? "")}
          onChange={(e) => props.onChange(e.currentTarget.value || undefined)}
        >
          <option value="">default</option>
          {schema.enum.map((v) => (
            <option key={String(v)}>{String(v)}</option>
          ))}
        </select>
      </label>
    );
  if (schema.type === "boolean")
    return (
      <label>
        <input
          type="checkbox"
          title={label}
          checked={props.value === true}
          onChange={(e) => props.onChange(e.currentTarget.checked || undefined)}
        />
        {name}
      </label>
    );
  const value = props.value === undefined ? "" : String(props.value);
  if (schema.type === "number" || schema.type === "integer")
    return (
      <label>
        {name}
        <input
          type="number"
          title={label}
          step={schema.type === "integer" ? 1 : "any"}
          {...(schema.minimum !== undefined ? { min: schema.minimum } : {})}
          {...(schema.maximum !== undefined ? { max: schema.maximum } : {})}
          value={value}
          onInput={(e) => {
            const text = e.currentTarget.value;
            props.onChange(text === "" ? undefined : Number(text));
          }}
        />
      </label>
    );
  return (
    <label>
      {name}
      <input
        type="text"
        title={label}
        value={value}
        onInput={(e) => props.onChange(e.currentTarget.value || undefined)}
      />
    </label>
  );
}
