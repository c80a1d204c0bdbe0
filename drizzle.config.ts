import { defineConfig } from 'drizzle-kit'

// Used only by `npx drizzle-kit generate` to write storage/migrations from storage/schema.ts.
export default defineConfig({
  dialect: 'sqlite',
  schema: './storage/schema.ts',
  out: './storage/migrations',
})
