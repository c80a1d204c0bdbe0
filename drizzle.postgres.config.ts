import { defineConfig } from 'drizzle-kit'

// Used only by `npx drizzle-kit generate --config drizzle.postgres.config.ts` to write
// storage/postgres/migrations from storage/postgres/schema.ts.
export default defineConfig({
  dialect: 'postgresql',
  schema: './storage/postgres/schema.ts',
  out: './storage/postgres/migrations',
})
