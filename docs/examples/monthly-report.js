// On the 1st of each month: last month's sales, e-mailed to the managers by an e-mail target on "report.*".
// The shop adds each sale to kv under "sales:YYYY-MM" (a list of {order, amount}).
export default async function (event) {
  const day = new Date(event.scheduledFor);
  day.setUTCDate(0);                                    // the last day of the month before
  const month = day.toISOString().slice(0, 7);
  const sales = (await almanac.kv.get(`sales:${month}`)) ?? [];
  const total = sales.reduce((sum, sale) => sum + sale.amount, 0);
  await almanac.emit("report.monthly", {month, orders: sales.length, total: total.toFixed(2)});
  return {month, orders: sales.length, total};
}
