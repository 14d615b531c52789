// Stand-in for @sinclair/typebox: job.ts builds its parameter schema at load
// time; the adapter checks arguments itself, so the schema is inert data.

const schema = (kind) => (...args) => ({ kind, args });

export const Type = {
  Object: schema('object'),
  Optional: schema('optional'),
  Array: schema('array'),
  String: schema('string'),
  Boolean: schema('boolean'),
  Number: schema('number'),
  Union: schema('union'),
  Literal: schema('literal'),
};
