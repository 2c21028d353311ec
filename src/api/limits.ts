/** Request bodies above this are refused with 413 before they are parsed. */
export const MAX_BODY_BYTES = 1024 * 1024;
/** The bulk node load is the one exception: 20,000 nodes need more than 1 MiB. */
export const MAX_BULK_BODY_BYTES = 8 * 1024 * 1024;
