import { z } from "zod";

/* The status page (/ui): what a browser sends it. */

/**
 * The {file} of GET /ui/static/{file}: a name shaped like one of the page's files (a 400
 * naming `file` otherwise, so `../x` or a NUL never reaches the lookup); a well-formed
 * name the page has no file of is a 404.
 */
export const StaticPath = z.strictObject({
  file: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}\.[a-z0-9]{1,8}$/, {
    error: "must be a file name of the page: letters, digits, - or _, then an extension (status.js)",
  }),
});

/**
 * The login form as a browser posts it (application/x-www-form-urlencoded). Other fields
 * are ignored: the form is ours, and a field a browser adds is no reason to refuse a login.
 */
export const LoginForm = z.object({
  token: z.string().trim().min(1),
});
