import { z } from "zod";

/** A tenant's id: `ten_` and up to 64 of its own characters (68 in all). */
export const TenantId = z
  .string()
  .regex(/^ten_[0-9a-z_-]{1,64}$/, "ten_ then up to 64 lowercase letters, digits, _ or -");
