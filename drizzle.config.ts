import { defineConfig } from 'drizzle-kit'

// Used only by `npx drizzle-kit generate` to write storage/sqlite/migrations from storage/sqlite/schema.ts.
export default defineConfig({
  dialect: 'sqlite',
  schema: './storage/sqlite/schema.ts',
  out: './storage/sqlite/migrations',
})
