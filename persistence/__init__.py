"""Our PostgreSQL schema, migrations, named queries and the task store (psycopg 3)."""
