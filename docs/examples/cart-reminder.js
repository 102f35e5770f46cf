// An abandoned cart: remind the customer, check again later, stop once the order has shipped.
// Payload: {"cart": "c-1001", "email": "ada@example.com", "recheck_seconds": 86400, "reminders": 0}
export default async function (event) {
  const {cart, email, recheck_seconds = 86400, reminders = 0} = event.payload;
  const order = await almanac.kv.get(`order:${cart}`);  // your shop writes this when the order ships
  if (order?.shipped) return {cart, stopped: "shipped"};
  if (reminders >= 3) return {cart, stopped: "three reminders sent"};

  await almanac.emit("cart.reminder", {cart, email, reminder: reminders + 1});  // to the tenant's e-mail or webhook targets
  const later = new Date(Date.parse(event.firedAt) + recheck_seconds * 1000).toISOString();
  // The key names this check: if this run is retried, the next check is planned once, not twice.
  await almanac.schedule.at(later, {...event.payload, reminders: reminders + 1}, {key: `cart-${cart}-${reminders + 1}`});
  return {cart, reminded: reminders + 1, next_check: later};
}
