// Shared with the server's embedded PostgreSQL, which needs the same two helpers.
export { freePort, withDatabase } from '../../server/embedded-postgres.js';
