// Validates the generated OpenAPI (Swagger 2.0) documents against the
// specification's schema, offline: `make sdk-ts` runs it.
import SwaggerParser from "@apidevtools/swagger-parser";

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node validate-openapi.js FILE...");
  process.exit(2);
}
let failed = false;
for (const file of files) {
  try {
    const api = await SwaggerParser.validate(file);
    console.log(`${file}: valid (${Object.keys(api.paths ?? {}).length} paths)`);
  } catch (err) {
    console.error(`${file}: ${err.message}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
