/**
 * A page of a list as it is written out (api/http/stream.ts): items as JSON text, or items
 * already joined and encoded (comma-separated JSON, as a kept node listing holds them:
 * written without another copy).
 */
export type ListPage = readonly string[] | Buffer;
